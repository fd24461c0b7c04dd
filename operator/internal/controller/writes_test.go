package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// A reconcile that finds everything in place sends no write to the
// apiserver: no apply, no status patch, no event.
func TestNoOpReconcileMakesNoWrites(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "steady", 3, func(m *cachev1alpha1.Memcached) {
		m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
	})
	createReady(t, mc)
	// Let the manager's cache catch up with the test's last status write.
	NewWithT(t).Eventually(func(g Gomega) []string {
		mark := managerRequests.mark()
		_, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
		return managerRequests.writesSince(mark)
	}, timeout, interval).Should(BeEmpty())

	// Direct calls, as many times as a resync would.
	mark := managerRequests.mark()
	for range 5 {
		_, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(managerRequests.writesSince(mark)).To(BeEmpty())

	// A watch-triggered reconcile (an annotation change passes the
	// predicates) writes nothing either.
	mark = managerRequests.mark()
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Annotations = map[string]string{"touched": "yes"} })
	NewWithT(t).Consistently(func() []string { return managerRequests.writesSince(mark, "/namespaces/"+ns+"/") }, "2s", interval).Should(BeEmpty())
}
