//go:build !unit

package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// A paused Memcached's objects are left alone, status says so, and resuming
// heals whatever changed meanwhile.
func TestPauseAndResume(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "paused", 3)
	createReady(t, mc)

	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Paused = true })
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionProgressing)
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonPaused))
		g.Expect(c.ObservedGeneration).To(Equal(fetch(g, mc).Generation))
	}, timeout, interval).Should(Succeed())
	g.Expect(condition(g, mc, cachev1alpha1.ConditionReady).Reason).To(Equal(cachev1alpha1.ReasonPaused))

	// Neither drift nor spec changes touch the Deployment while paused.
	mark := managerRequests.mark()
	update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](1) })
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Image = "memcached:1.6.38-alpine" })
	NewWithT(t).Consistently(func(g Gomega) {
		d := fetch(g, deploymentOf(mc))
		g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(testDefaults.MemcachedImage))
	}, 2*time.Second, interval).Should(Succeed())
	g.Expect(managerRequests.writesSince(mark, "/deployments")).To(BeEmpty())
	g.Expect(managerRequests.writesSince(mark, "/services")).To(BeEmpty())
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventPaused))

	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Paused = false })
	NewWithT(t).Eventually(func(g Gomega) {
		d := fetch(g, deploymentOf(mc))
		g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("memcached:1.6.38-alpine"))
	}, timeout, interval).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) string {
		return condition(g, mc, cachev1alpha1.ConditionProgressing).Reason
	}, timeout, interval).ShouldNot(Equal(cachev1alpha1.ReasonPaused))
	g.Expect(condition(g, mc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse), "the new image is not rolled out yet")
	markDeploymentReady(t, mc)
	expectReady(t, mc)
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventResumed))
}
