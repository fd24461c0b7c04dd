//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/metrics"
)

// A Service of the Memcached's name that exists without the operator's
// labels (a cache being migrated to the operator) is invisible to the
// manager's filtered cache. The operator must find it with an uncached read
// and leave it alone, reporting Stalled with reason ResourceExists, instead
// of taking it over with a forced apply (rewriting its selector, adding an
// owner reference, deleting it with the Memcached). Removing it heals.
func TestSameNamedObjectIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	legacy := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: map[string]string{"app": "legacy-cache"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "legacy-cache"},
			Ports:    []corev1.ServicePort{{Name: "memcache", Port: 11211, TargetPort: intstr.FromInt32(11211)}},
		},
	}
	g.Expect(k8sClient.Create(testCtx, legacy)).To(Succeed())
	before := fetch(g, legacy)

	errorsBefore := testutil.ToFloat64(metrics.ReconcileErrors.WithLabelValues(metrics.ReasonResourceExists))
	mc := newMemcached(ns, "legacy", 2)
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		for _, condType := range []string{cachev1alpha1.ConditionStalled, cachev1alpha1.ConditionDegraded} {
			c := condition(g, mc, condType)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), condType)
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonResourceExists), condType)
			g.Expect(c.Message).To(ContainSubstring("Service legacy already exists and is not controlled by this Memcached"))
		}
		g.Expect(condition(g, mc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventResourceExists))
	// Counted when the reconcile returns, after its status write.
	NewWithT(t).Eventually(func() float64 {
		return testutil.ToFloat64(metrics.ReconcileErrors.WithLabelValues(metrics.ReasonResourceExists))
	}, timeout, interval).Should(BeNumerically(">", errorsBefore), "memcached_operator_reconcile_errors_total{reason=ResourceExists}")

	// Untouched: same resourceVersion, selector and owners.
	after := fetch(g, legacy)
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
	g.Expect(after.Spec.Selector).To(Equal(map[string]string{"app": "legacy-cache"}))
	g.Expect(after.OwnerReferences).To(BeEmpty())
	// What the operator does own is in place.
	fetch(g, deploymentOf(mc))

	// Deleting the Memcached leaves the foreign Service alone too.
	g.Expect(k8sClient.Delete(testCtx, mc)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		err := k8sClient.Get(testCtx, key(mc), &cachev1alpha1.Memcached{})
		g.Expect(err).To(HaveOccurred())
	}, timeout, interval).Should(Succeed())
	g.Expect(fetch(g, legacy).ResourceVersion).To(Equal(before.ResourceVersion))

	// Once the old Service is gone, a new Memcached of that name converges.
	g.Expect(k8sClient.Delete(testCtx, legacy)).To(Succeed())
	again := newMemcached(ns, "legacy", 2)
	createReady(t, again)
	g.Expect(condition(g, again, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
}
