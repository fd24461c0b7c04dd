package bench

import (
	"context"
	"errors"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// SeedReconciler is the reconciler of the seed tutorial (operator-sdk's
// Memcached sample), kept here as the baseline and never shipped: Get the
// CR, create the Deployment if missing and requeue, fix replicas with an
// Update. One worker, no status, no Service, no budget.
type SeedReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// Reconcile is the tutorial's, line for line.
func (r *SeedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	memcached := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	found := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Name: memcached.Name, Namespace: memcached.Namespace}, found)
	if err != nil && apierrors.IsNotFound(err) {
		dep, err := r.deploymentForMemcached(memcached)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err = r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the tutorial's code, deprecated field and all
	} else if err != nil {
		return ctrl.Result{}, err
	}
	size := memcached.GetSize()
	if *found.Spec.Replicas != size {
		found.Spec.Replicas = &size
		if err = r.Update(ctx, found); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// deploymentForMemcached is operator-sdk's sample Deployment: a fixed label
// set (plus the CR name), the image, the port, a controller reference.
func (r *SeedReconciler) deploymentForMemcached(m *cachev1alpha1.Memcached) (*appsv1.Deployment, error) {
	ls := map[string]string{"app.kubernetes.io/name": "memcached-operator", "app.kubernetes.io/instance": m.Name}
	replicas := m.GetSize()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Image:   "memcached:1.6.39-alpine",
					Name:    "memcached",
					Command: []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
					Ports:   []corev1.ContainerPort{{ContainerPort: 11211, Name: "memcached"}},
				}}},
			},
		},
	}
	if err := ctrl.SetControllerReference(m, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

// RunSeedManager runs the seed reconciler as its own process would, with
// the tutorial's manager defaults, serving controller-runtime's metrics on
// metricsAddr so the harness can count its requests.
func RunSeedManager(kubeconfig, metricsAddr string) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
	if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), cachev1alpha1.AddToScheme(scheme)); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	r := &SeedReconciler{Client: mgr.GetClient(), Scheme: scheme}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}).
		Owns(&appsv1.Deployment{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("memcached").
		Complete(r); err != nil {
		return fmt.Errorf("seed controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
