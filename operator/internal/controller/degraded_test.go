//go:build !unit

package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// When the apiserver rejects the pod template (here: a node selector value
// that is not a valid label value, which the CRD leaves to the apiserver),
// the Memcached turns Degraded and Stalled (reason Invalid) with the
// apiserver's message, so kstatus reports Failed at once; a Warning event is
// recorded, and retries back off instead of hammering the apiserver. Fixing
// the spec recovers.
func TestRejectedPodTemplateDegrades(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "rejected", 1, func(m *cachev1alpha1.Memcached) {
		m.Spec.NodeSelector = map[string]string{"pool": "not a label value!"}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())

	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionDegraded)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonInvalid))
		g.Expect(c.Message).To(ContainSubstring("spec.template.spec.nodeSelector"))
		stalled := condition(g, mc, cachev1alpha1.ConditionStalled)
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonInvalid))
		ready := condition(g, mc, cachev1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(cachev1alpha1.ReasonInvalid))
	}, timeout, interval).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventApplyFailed))

	// Exponential backoff: a hot loop would send hundreds of applies in a few
	// seconds; backoff doubling from 5ms sends about a dozen.
	mark := managerRequests.mark()
	time.Sleep(3 * time.Second)
	attempts := managerRequests.writesSince(mark, "/namespaces/"+ns+"/deployments/rejected")
	g.Expect(len(attempts)).To(BeNumerically("<", 15), "apply attempts in 3s: %d", len(attempts))

	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"pool": "cache"} })
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(condition(g, mc, cachev1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(g, mc, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
	markDeploymentReady(t, mc)
	expectReady(t, mc)
}
