//go:build !unit

package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// staleReads serves one Memcached from a snapshot, as an informer cache
// that has not yet seen the operator's last write would.
type staleReads struct {
	client.Client
	snapshot *cachev1alpha1.Memcached
}

func (s *staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if mc, ok := obj.(*cachev1alpha1.Memcached); ok && s.snapshot != nil && key == client.ObjectKeyFromObject(s.snapshot) {
		s.snapshot.DeepCopyInto(mc)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// A reconcile that reads a Memcached older than the operator's own last
// status write must not trust it. Here the stale copy's status (rolling
// out) happens to equal what the reconcile computes, while the apiserver
// holds the newer Ready=True: a reconcile that compared with the stale copy
// would skip the write and leave a Ready status that nothing would correct.
// The reconciler notices the copy predates its own write, reads the
// apiserver's, and writes.
func TestStaleCacheCannotLeaveAWrongStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx
	mc := newMemcached(unmanagedNamespace, "stale", 2)
	createUnmanaged(t, mc)
	reads := &staleReads{Client: k8sClient}
	r := &MemcachedReconciler{Client: podsFromCache{reads}, APIReader: k8sClient, Defaults: testDefaults}
	reconcile := func() {
		t.Helper()
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	ready := func() metav1.ConditionStatus { return condition(g, mc, cachev1alpha1.ConditionReady).Status }

	reconcile() // creates the objects; the Deployment is not ready yet
	g.Expect(ready()).To(Equal(metav1.ConditionFalse))
	rollingOut := fetch(g, mc)

	markDeploymentReady(t, mc)
	reconcile()
	g.Expect(ready()).To(Equal(metav1.ConditionTrue))

	// The Deployment falls back to the state of the first reconcile, and
	// the next reconcile sees the Memcached as it was then.
	d := fetch(g, deploymentOf(mc))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	g.Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	reads.snapshot = rollingOut
	reconcile()
	g.Expect(ready()).To(Equal(metav1.ConditionFalse), "the status must follow the Deployment, whatever the cache said")
}
