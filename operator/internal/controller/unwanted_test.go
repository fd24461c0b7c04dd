//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Objects and fields that are no longer wanted go away: the budget when it is
// turned off, the exporter container and its Service port when monitoring is.
func TestUnwantedObjectsAreRemoved(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "unwanted", 3, func(m *cachev1alpha1.Memcached) {
		m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
		m.Spec.NodeSelector = map[string]string{"pool": "cache"}
	})
	createReady(t, mc)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}
	g.Expect(fetch(g, deploymentOf(mc)).Spec.Template.Spec.Containers).To(HaveLen(2))
	g.Expect(fetch(g, svc).Spec.Ports).To(HaveLen(2))
	fetch(g, pdb)
	// Created with a POST: its fields are the create's until the first
	// change hands them over to the operator's apply (apply.go).
	g.Expect(managerEntries(fetch(g, deploymentOf(mc)))).To(ConsistOf(metav1.ManagedFieldsOperationUpdate))

	update(t, mc, func(m *cachev1alpha1.Memcached) {
		m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{
			PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)},
		}
		m.Spec.Monitoring = nil
		m.Spec.NodeSelector = nil
	})
	NewWithT(t).Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(testCtx, key(pdb), pdb)) }, timeout, interval).Should(BeTrue())
	NewWithT(t).Eventually(func(g Gomega) {
		pod := fetch(g, deploymentOf(mc)).Spec.Template.Spec
		g.Expect(pod.Containers).To(HaveLen(1))
		g.Expect(pod.Containers[0].Name).To(Equal("memcached"))
		g.Expect(pod.NodeSelector).To(BeEmpty())
		g.Expect(fetch(g, svc).Spec.Ports).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
	g.Expect(managerEntries(fetch(g, deploymentOf(mc)))).To(ConsistOf(metav1.ManagedFieldsOperationApply))
	g.Expect(managerEntries(fetch(g, svc))).To(ConsistOf(metav1.ManagedFieldsOperationApply))

	// Scaling down to one pod with the budget left at its default removes it too.
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.HighAvailability = nil })
	NewWithT(t).Eventually(func(g Gomega) { fetch(g, pdb) }, timeout, interval).Should(Succeed())
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](1) })
	NewWithT(t).Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(testCtx, key(pdb), pdb)) }, timeout, interval).Should(BeTrue())
}

// managerEntries are the operations of the operator's managedFields entries
// on obj.
func managerEntries(obj client.Object) []metav1.ManagedFieldsOperationType {
	var out []metav1.ManagedFieldsOperationType
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldOwner {
			out = append(out, e.Operation)
		}
	}
	return out
}
