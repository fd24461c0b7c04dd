//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// After every spec change, status.observedGeneration and each condition's
// observedGeneration name the generation they describe, so kstatus, Flux and
// Argo CD never read a stale Ready.
func TestConditionsFollowGeneration(t *testing.T) {
	ns := newNamespace(t)
	mc := newMemcached(ns, "generations", 1)
	createReady(t, mc)

	changes := []func(*cachev1alpha1.Memcached){
		func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](2) },
		func(m *cachev1alpha1.Memcached) { m.Spec.Image = "memcached:1.6.38-alpine" },
		func(m *cachev1alpha1.Memcached) {
			m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{Verbosity: 1}
		},
	}
	for i, change := range changes {
		update(t, mc, change)
		NewWithT(t).Eventually(func(g Gomega) {
			cur := fetch(g, mc)
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
			g.Expect(cur.Status.Conditions).To(HaveLen(5))
			for _, c := range cur.Status.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(cur.Generation), "change %d: condition %s", i, c.Type)
			}
			// The spec changed the Deployment, which has not rolled out yet.
			ready := condition(g, mc, cachev1alpha1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "change %d", i)
		}, timeout, interval).Should(Succeed())
		markDeploymentReady(t, mc)
		expectReady(t, mc)
	}
}
