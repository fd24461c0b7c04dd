//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `kubectl scale memcached/NAME --replicas=5` goes through the scale
// subresource: spec.size changes and the Deployment follows.
func TestScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "scaled", 3)
	createReady(t, mc)

	scale := &autoscalingv1.Scale{}
	g.Expect(k8sClient.SubResource("scale").Get(testCtx, mc, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(scale.Status.Replicas).To(Equal(int32(3)))
	g.Expect(scale.Status.Selector).To(Equal("app.kubernetes.io/instance=scaled,app.kubernetes.io/name=memcached"))

	scale.Spec.Replicas = 5
	g.Expect(k8sClient.SubResource("scale").Update(testCtx, mc, client.WithSubResourceBody(scale))).To(Succeed())

	g.Expect(fetch(g, mc).Spec.Size).To(HaveValue(Equal(int32(5))))
	NewWithT(t).Eventually(func(g Gomega) int32 { return *fetch(g, deploymentOf(mc)).Spec.Replicas }, timeout, interval).Should(Equal(int32(5)))
	markDeploymentReady(t, mc)
	expectReady(t, mc)
	g.Expect(fetch(g, mc).Status.ReadyReplicas).To(Equal(int32(5)))
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventScaled))
}
