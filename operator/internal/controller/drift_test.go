//go:build !unit

package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/operator/internal/metrics"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Changes made behind the operator's back are undone as soon as the watch
// delivers them.
func TestDriftIsHealed(t *testing.T) {
	ns := newNamespace(t)
	mc := newMemcached(ns, "drift", 3)
	createReady(t, mc)
	svcKey := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}

	t.Run("replicas", func(t *testing.T) {
		heals := testutil.ToFloat64(metrics.DriftHeals.WithLabelValues("Deployment"))
		updates := testutil.ToFloat64(metrics.OwnedWrites.WithLabelValues("Deployment", metrics.WriteUpdated))
		update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](1) })
		NewWithT(t).Eventually(func(g Gomega) int32 { return *fetch(g, deploymentOf(mc)).Spec.Replicas }, timeout, interval).Should(Equal(int32(3)))
		// Counted as a write and as a heal. The reconcile counts its writes
		// after they return, so a reader of the Deployment can see the
		// healed replicas a moment before the counters move.
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(testutil.ToFloat64(metrics.DriftHeals.WithLabelValues("Deployment"))).To(BeNumerically(">", heals), "memcached_operator_drift_heals_total")
			g.Expect(testutil.ToFloat64(metrics.OwnedWrites.WithLabelValues("Deployment", metrics.WriteUpdated))).To(BeNumerically(">", updates), "memcached_operator_owned_writes_total")
		}, timeout, interval).Should(Succeed())
	})

	t.Run("image", func(t *testing.T) {
		update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "memcached:evil" })
		NewWithT(t).Eventually(func(g Gomega) string {
			return fetch(g, deploymentOf(mc)).Spec.Template.Spec.Containers[0].Image
		}, timeout, interval).Should(Equal(testDefaults.MemcachedImage))
	})

	t.Run("deleted Service", func(t *testing.T) {
		g := NewWithT(t)
		old := fetch(g, svcKey)
		g.Expect(k8sClient.Delete(testCtx, old)).To(Succeed())
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(fetch(g, svcKey).UID).NotTo(Equal(old.UID))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("edited labels", func(t *testing.T) {
		update(t, svcKey, func(s *corev1.Service) { s.Labels[resources.LabelName] = "not-memcached" })
		NewWithT(t).Eventually(func(g Gomega) map[string]string { return fetch(g, svcKey).Labels }, timeout, interval).
			Should(HaveKeyWithValue(resources.LabelName, resources.AppName))
	})

	t.Run("removed managed-by label", func(t *testing.T) {
		// Without the label the object leaves the manager's cache: the
		// operator sees it as missing and applies it, which restores the label.
		update(t, deploymentOf(mc), func(d *appsv1.Deployment) { delete(d.Labels, resources.LabelManagedBy) })
		NewWithT(t).Eventually(func(g Gomega) map[string]string { return fetch(g, deploymentOf(mc)).Labels }, timeout, interval).
			Should(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy))
	})

	t.Run("deleted PodDisruptionBudget", func(t *testing.T) {
		g := NewWithT(t)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}
		old := fetch(g, pdb)
		g.Expect(k8sClient.Delete(testCtx, old)).To(Succeed())
		NewWithT(t).Eventually(func(g Gomega) string { return string(fetch(g, pdb).UID) }, timeout, interval).ShouldNot(Equal(string(old.UID)))
	})

	// An object of the Memcached's that lost its owner reference still
	// carries the operator's labels: it is adopted back, not reported as
	// someone else's (TestSameNamedObjectIsNotTakenOver is the other side).
	t.Run("removed owner reference", func(t *testing.T) {
		update(t, svcKey, func(s *corev1.Service) { s.OwnerReferences = nil })
		NewWithT(t).Eventually(func(g Gomega) bool { return metav1.IsControlledBy(fetch(g, svcKey), fetch(g, mc)) }, timeout, interval).
			Should(BeTrue())
	})

	// The budget's watch filters out status churn; an owner reference
	// removed from it must still wake the operator (found by test/chaos).
	t.Run("removed budget owner reference", func(t *testing.T) {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}
		update(t, pdb, func(p *policyv1.PodDisruptionBudget) { p.OwnerReferences = nil })
		NewWithT(t).Eventually(func(g Gomega) bool { return metav1.IsControlledBy(fetch(g, pdb), fetch(g, mc)) }, timeout, interval).
			Should(BeTrue())
	})

	// Fields other managers add are theirs: the operator does not fight a
	// label it never set.
	t.Run("foreign additions are kept", func(t *testing.T) {
		update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Labels["team"] = "payments" })
		NewWithT(t).Consistently(func(g Gomega) map[string]string { return fetch(g, deploymentOf(mc)).Labels }, time.Second, interval).
			Should(HaveKeyWithValue("team", "payments"))
	})
}
