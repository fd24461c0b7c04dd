package controller

import (
	"cmp"
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// warmUpPageSize is how many Deployments, templates included, the warm-up
// holds at a time.
const warmUpPageSize = 500

// templateWarmUp fills the template record (templates.go) when the manager
// becomes the leader. The cache keeps only a fingerprint of each
// Deployment's pod template and a new process remembers no verified one, so
// without it every reconcile of the resync that follows a restart would read
// its Deployment from the apiserver: 10,000 GETs for 10,000 Memcacheds. The
// warm-up reads the operator's Deployments instead with a paginated LIST, a
// page in memory at a time, and compares each template with its Memcached's
// desired one as a reconcile would. Reconciles that would read a template
// wait for it (verifiedTemplates.awaitWarmUp); a template it could not
// verify (changed by hand, say) is read and healed by the reconcile as
// before.
type templateWarmUp struct {
	r *MemcachedReconciler
	// namespaces are the watched ones; none means all.
	namespaces []string
	// pageSize: warmUpPageSize when zero.
	pageSize int64
}

// NeedLeaderElection: only the leader reconciles, so only it warms up.
func (w templateWarmUp) NeedLeaderElection() bool { return true }

// Start runs the warm-up once. It never fails the manager: whatever it did
// not verify, reconciles read.
func (w templateWarmUp) Start(ctx context.Context) error {
	defer w.r.templates().warmedUp()
	logger := ctrl.Log.WithName("template-warm-up")
	start, listed, verified := time.Now(), 0, 0
	namespaces := w.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		for token := ""; ; {
			page := &appsv1.DeploymentList{}
			if err := w.r.APIReader.List(ctx, page, client.InNamespace(ns), client.MatchingLabels{resources.LabelManagedBy: resources.ManagedBy},
				client.Limit(cmp.Or(w.pageSize, warmUpPageSize)), client.Continue(token)); err != nil {
				logger.Error(err, "list Deployments: reconciles read their templates one by one", "namespace", ns)
				return nil
			}
			for i := range page.Items {
				listed++
				if w.r.verifyListed(ctx, &page.Items[i]) {
					verified++
				}
			}
			if token = page.Continue; token == "" {
				break
			}
		}
	}
	logger.Info("verified pod templates", "verified", verified, "listed", listed, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// verifyListed records d's template as verified when it holds everything
// its Memcached's desired Deployment sets: the comparison applyIfChanged
// makes (holdsDesired).
func (r *MemcachedReconciler) verifyListed(ctx context.Context, d *appsv1.Deployment) bool {
	owner := metav1.GetControllerOf(d)
	if owner == nil || owner.Kind != "Memcached" {
		return false
	}
	mc := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: owner.Name}, mc); err != nil ||
		mc.UID != owner.UID || mc.GetIdentity() == cachev1alpha1.IdentityStable {
		return false
	}
	want, err := desiredObject(resources.Deployment(mc, r.Defaults))
	if err != nil {
		return false
	}
	_, holds, err := r.holdsDesired(want, d)
	return err == nil && holds
}
