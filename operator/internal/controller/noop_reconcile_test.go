//go:build !unit

package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// A reconcile that finds everything in place sends no write to the
// apiserver: no apply, no status patch, no event, and reads nothing from it.
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
	// Nor does it read the Deployment from the apiserver: the cache holds it
	// without its pod template, and the template's fingerprint, computed from
	// the watch event, is the one of the apply's answer.
	g.Expect(managerRequests.readsSince(mark, "/deployments/")).To(BeEmpty())

	// A restarted manager remembers no template: it reads the Deployment
	// once, and writes nothing either.
	restarted := &MemcachedReconciler{Client: reconciler.Client, APIReader: reconciler.APIReader, Recorder: reconciler.Recorder, Defaults: testDefaults}
	mark = managerRequests.mark()
	for range 2 {
		_, err := restarted.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(managerRequests.writesSince(mark)).To(BeEmpty())
	g.Expect(managerRequests.readsSince(mark, "/deployments/")).To(HaveLen(1))

	// A watch-triggered reconcile (an annotation change passes the
	// predicates) writes nothing either.
	mark = managerRequests.mark()
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Annotations = map[string]string{"touched": "yes"} })
	NewWithT(t).Consistently(func() []string { return managerRequests.writesSince(mark, "/namespaces/"+ns+"/") }, "2s", interval).Should(BeEmpty())
}

// The predicate's content test: which updates are the operator's own.
func TestOnlyOwnChanges(t *testing.T) {
	base := &cachev1alpha1.Memcached{}
	base.UID = "u"
	base.Labels = map[string]string{"app": "cache"}
	base.Status.ObservedGeneration = 1
	// As the reconciler sets it: a condition stamped now, to the nanosecond.
	written := cachev1alpha1.MemcachedStatus{ObservedGeneration: 2, Replicas: 3,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}}
	other := cachev1alpha1.MemcachedStatus{ObservedGeneration: 2, Replicas: 1}
	r := &MemcachedReconciler{}
	r.tracker().writingStatus("u", &written)

	tests := []struct {
		name   string
		change func(m *cachev1alpha1.Memcached)
		own    bool
	}{
		{"nothing", func(*cachev1alpha1.Memcached) {}, true},
		{"the operator's finalizer added", func(m *cachev1alpha1.Memcached) { m.Finalizers = []string{cachev1alpha1.Finalizer} }, true},
		{"another finalizer added", func(m *cachev1alpha1.Memcached) { m.Finalizers = []string{"example.com/other"} }, false},
		{"the status the operator is writing, as the watch shows it", func(m *cachev1alpha1.Memcached) {
			m.Status = *written.DeepCopy()
			m.Status.Conditions[0].LastTransitionTime = m.Status.Conditions[0].LastTransitionTime.Rfc3339Copy()
		}, true},
		{"a status edited by someone else", func(m *cachev1alpha1.Memcached) { m.Status = other }, false},
		{"a label", func(m *cachev1alpha1.Memcached) { m.Labels = map[string]string{"app": "other"} }, false},
		{"an annotation", func(m *cachev1alpha1.Memcached) { m.Annotations = map[string]string{"a": "b"} }, false},
		{"a new generation", func(m *cachev1alpha1.Memcached) { m.Generation++ }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tt.change(cur)
			NewWithT(t).Expect(r.onlyOwnChanges(base, cur)).To(Equal(tt.own))
		})
	}

	// The operator's finalizer removed by someone else is not its own change.
	withFinalizer := base.DeepCopy()
	withFinalizer.Finalizers = []string{cachev1alpha1.Finalizer}
	NewWithT(t).Expect(r.onlyOwnChanges(withFinalizer, base)).To(BeFalse())
}
