//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// A memcached configuration change changes the pod template's config hash,
// so the Deployment rolls the pods onto the new flags.
func TestConfigChangeRollsPods(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "config", 2)
	createReady(t, mc)
	before := fetch(g, deploymentOf(mc)).Spec.Template.Annotations[resources.ConfigHashAnnotation]
	g.Expect(before).NotTo(BeEmpty())

	update(t, mc, func(m *cachev1alpha1.Memcached) {
		m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](128), Threads: ptr.To[int32](2)}
	})
	NewWithT(t).Eventually(func(g Gomega) {
		d := fetch(g, deploymentOf(mc))
		g.Expect(d.Spec.Template.Annotations[resources.ConfigHashAnnotation]).NotTo(Equal(before))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("128", "2"))
	}, timeout, interval).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventUpdated))

	// The apiserver applied the CRD defaults to the fields left unset.
	cfg := fetch(g, mc).Spec.Memcached
	g.Expect(cfg.MaxConnections).To(HaveValue(Equal(int32(1024))))
}
