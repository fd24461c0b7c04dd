//go:build !unit

package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// newNamespace creates a namespace for one test. envtest runs no namespace
// controller, so instead of deleting the namespace (it would stay
// Terminating) the test's Memcacheds are deleted, which also exercises the
// finalizer once more.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mc-" + rand.String(8)}}
	if err := k8sClient.Create(testCtx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = k8sClient.DeleteAllOf(testCtx, &cachev1alpha1.Memcached{}, client.InNamespace(ns.Name))
	})
	return ns.Name
}

// loadSample decodes the seed tutorial's CR exactly as committed in
// deploy/samples, so the tests prove that file works unchanged.
func loadSample(t *testing.T, namespace string) *cachev1alpha1.Memcached {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "samples", "memcached-sample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mc := &cachev1alpha1.Memcached{}
	if err := yaml.UnmarshalStrict(raw, mc); err != nil {
		t.Fatalf("decode sample: %v", err)
	}
	mc.Namespace = namespace
	return mc
}

// fetch returns a fresh copy of obj's kind and key from the apiserver.
func fetch[T client.Object](g Gomega, obj T) T {
	fresh := obj.DeepCopyObject().(T)
	g.Expect(k8sClient.Get(testCtx, key(obj), fresh)).To(Succeed())
	return fresh
}

// update re-reads obj, applies change and updates it, retrying conflicts.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		fresh := fetch(g, obj)
		change(fresh)
		g.Expect(k8sClient.Update(testCtx, fresh)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func deploymentOf(mc *cachev1alpha1.Memcached) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name}}
}

// markDeploymentReady plays the Deployment controller, which envtest does
// not run: every wanted pod is updated, ready and available.
func markDeploymentReady(t *testing.T, mc *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		d := fetch(g, deploymentOf(mc))
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		g.Expect(k8sClient.Status().Update(testCtx, d)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// condition returns the named condition of mc as the apiserver holds it.
func condition(g Gomega, mc *cachev1alpha1.Memcached, condType string) metav1.Condition {
	c := meta.FindStatusCondition(fetch(g, mc).Status.Conditions, condType)
	g.Expect(c).NotTo(BeNil(), "condition %s", condType)
	return *c
}

// expectReady waits until mc reports Ready=True for its current generation.
func expectReady(t *testing.T, mc *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := fetch(g, mc)
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(cur.Generation))
	}, timeout, interval).Should(Succeed())
}

// createReady creates mc, plays the Deployment controller, and waits for Ready.
func createReady(t *testing.T, mc *cachev1alpha1.Memcached) {
	t.Helper()
	if err := k8sClient.Create(testCtx, mc); err != nil {
		t.Fatalf("create %s: %v", mc.Name, err)
	}
	NewWithT(t).Eventually(func(g Gomega) { fetch(g, deploymentOf(mc)) }, timeout, interval).Should(Succeed())
	markDeploymentReady(t, mc)
	expectReady(t, mc)
}

// eventReasons lists the reasons of the events recorded about mc.
func eventReasons(g Gomega, mc *cachev1alpha1.Memcached) []string {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(testCtx, list, client.InNamespace(mc.Namespace))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Memcached" && e.Regarding.Name == mc.Name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// createUnmanaged creates mc in the namespace the manager does not watch,
// for a test that runs a reconciler of its own, and deletes it afterwards
// (its finalizer dropped: no reconciler is there to release it) with its
// owned objects (envtest runs no garbage collector), so that the test can
// run again (-count).
func createUnmanaged(t *testing.T, mc *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	t.Cleanup(func() {
		cur := &cachev1alpha1.Memcached{}
		if k8sClient.Get(testCtx, key(mc), cur) == nil {
			cur.Finalizers = nil
			_ = k8sClient.Update(testCtx, cur)
			_ = k8sClient.Delete(testCtx, cur)
		}
		meta := metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name}
		for _, obj := range []client.Object{&appsv1.Deployment{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &policyv1.PodDisruptionBudget{ObjectMeta: meta}} {
			_ = k8sClient.Delete(testCtx, obj)
		}
	})
}

// podsFromCache lists pods from the manager's cache, which holds the
// instance index the reconciler lists them by; everything else goes to the
// wrapped client. It lets a test drive a reconciler of its own over a
// direct client.
type podsFromCache struct{ client.Client }

func (c podsFromCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return reconciler.List(ctx, list, opts...)
	}
	return c.Client.List(ctx, list, opts...)
}
