package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
