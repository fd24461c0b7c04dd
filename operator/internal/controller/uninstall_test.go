//go:build !unit

package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Uninstalling deletes every Memcached through the running operator and
// returns once they are gone; Memcacheds elsewhere are left alone.
func TestDeleteAllMemcacheds(t *testing.T) {
	g := NewWithT(t)
	ns, other := newNamespace(t), newNamespace(t)
	for _, name := range []string{"a", "b", "c"} {
		createReady(t, newMemcached(ns, name, 1))
	}
	kept := newMemcached(other, "kept", 1)
	createReady(t, kept)

	ctx, cancel := context.WithTimeout(testCtx, timeout)
	defer cancel()
	g.Expect(DeleteAllMemcacheds(ctx, k8sClient, []string{ns}, 50*time.Millisecond, testr.New(t))).To(Succeed())
	list := &cachev1alpha1.MemcachedList{}
	g.Expect(k8sClient.List(testCtx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
	g.Expect(k8sClient.Get(testCtx, key(kept), kept)).To(Succeed())
}

// With nothing releasing the finalizer (the operator gone), it gives up
// when its context ends and names what is left.
func TestDeleteAllMemcachedsNamesWhatIsLeft(t *testing.T) {
	g := NewWithT(t)
	ns := unmanagedNamespace
	mc := newMemcached(ns, "stuck", 1)
	mc.Finalizers = []string{cachev1alpha1.Finalizer}
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	t.Cleanup(func() {
		update(t, mc, func(m *cachev1alpha1.Memcached) { m.Finalizers = nil })
	})

	// Long enough for the list and delete on a busy machine (the whole
	// module's tests run at once).
	ctx, cancel := context.WithTimeout(testCtx, 2*time.Second)
	defer cancel()
	err := DeleteAllMemcacheds(ctx, k8sClient, []string{ns}, 50*time.Millisecond, testr.New(t))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("1 Memcacheds are still there"))
	g.Expect(err.Error()).To(ContainSubstring(ns + "/stuck"))
	g.Expect(strings.Contains(err.Error(), "is the operator running")).To(BeTrue())
}
