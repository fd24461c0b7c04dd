//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Deleting a Memcached deletes what it owns through the finalizer (envtest
// runs no garbage collector, so nothing else could) and then the Memcached.
func TestDeleteRemovesEverything(t *testing.T) {
	ns := newNamespace(t)
	for _, paused := range []bool{false, true} {
		name := "deleted"
		if paused {
			name = "deleted-while-paused"
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mc := newMemcached(ns, name, 3)
			createReady(t, mc)
			if paused {
				update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Paused = true })
			}

			g.Expect(k8sClient.Delete(testCtx, mc)).To(Succeed())
			for _, obj := range []client.Object{
				deploymentOf(mc),
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				mc,
			} {
				NewWithT(t).Eventually(func() bool {
					return apierrors.IsNotFound(k8sClient.Get(testCtx, key(obj), obj))
				}, timeout, interval).Should(BeTrue(), "%T %s still exists", obj, name)
			}
			NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventDeleted))
		})
	}
}

// `kubectl delete --cascade=orphan` asks to keep what the Memcached owns.
// The finalizer honours it: the Deployment, Service and budget stay, an
// "Orphaned" event says so, and the finalizer is released. (envtest runs no
// garbage collector, so the apiserver's orphan finalizer stays on the
// Memcached here; test/e2e proves the whole story with the collector.)
func TestOrphanDeleteKeepsOwnedObjects(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "orphaned", 3)
	createReady(t, mc)

	g.Expect(k8sClient.Delete(testCtx, mc, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		cur := fetch(g, mc)
		g.Expect(cur.Finalizers).NotTo(ContainElement(cachev1alpha1.Finalizer))
		g.Expect(cur.Finalizers).To(ContainElement(metav1.FinalizerOrphanDependents))
	}, timeout, interval).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventOrphaned))
	for _, obj := range []client.Object{
		deploymentOf(mc),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}},
	} {
		g.Expect(k8sClient.Get(testCtx, key(obj), obj)).To(Succeed(), "%T must be kept", obj)
		g.Expect(obj.GetDeletionTimestamp()).To(BeNil())
	}
	g.Expect(eventReasons(g, mc)).NotTo(ContainElement(EventDeleted))

	// Release the Memcached as the garbage collector would.
	cur := fetch(g, mc)
	cur.Finalizers = nil
	g.Expect(k8sClient.Update(testCtx, cur)).To(Succeed())
}

// The garbage collector orphans in two steps: it removes the dependents'
// owner references, then its orphan finalizer. A finalize that runs after
// both (its first attempt to release the finalizer hit a conflict with the
// collector, as test/e2e once saw) finds no orphan finalizer and objects
// without an owner: they were orphaned, and stay.
func TestFinalizeAfterTheCollectorOrphanedKeepsTheObjects(t *testing.T) {
	g := NewWithT(t)
	mc := newMemcached(unmanagedNamespace, "collected", 2)
	createUnmanaged(t, mc)
	r := &MemcachedReconciler{Client: podsFromCache{k8sClient}, APIReader: k8sClient, Defaults: testDefaults}
	reconcile := func() {
		t.Helper()
		_, err := r.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	reconcile()
	owned := []client.Object{
		deploymentOf(mc),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name}},
	}
	for _, obj := range owned {
		update(t, obj, func(o client.Object) { o.SetOwnerReferences(nil) })
	}
	g.Expect(k8sClient.Delete(testCtx, fetch(g, mc))).To(Succeed()) // the orphan finalizer is gone already
	reconcile()
	g.Expect(apierrors.IsNotFound(k8sClient.Get(testCtx, key(mc), &cachev1alpha1.Memcached{}))).To(BeTrue(), "the finalizer is released")
	for _, obj := range owned {
		g.Expect(k8sClient.Get(testCtx, key(obj), obj)).To(Succeed(), "%T must be kept", obj)
		g.Expect(obj.GetDeletionTimestamp()).To(BeNil())
	}
}
