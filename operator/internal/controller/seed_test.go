//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// The seed tutorial's CR, unchanged, becomes a Deployment named after it with
// 3 replicas, a headless Service and a PodDisruptionBudget, and reports Ready
// once the Deployment's pods are.
func TestSeedSampleBecomesReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := loadSample(t, ns)
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())

	NewWithT(t).Eventually(func(g Gomega) {
		d := fetch(g, deploymentOf(mc))
		g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(testDefaults.MemcachedImage))
		g.Expect(metav1.IsControlledBy(d, fetch(g, mc))).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	svc := fetch(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memcached-sample"}})
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.Selector).To(Equal(resources.SelectorLabels(mc)))
	NewWithT(t).Eventually(func(g Gomega) {
		fetch(g, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memcached-sample"}})
	}, timeout, interval).Should(Succeed())

	cur := fetch(g, mc)
	g.Expect(cur.Spec.Size).To(HaveValue(Equal(int32(3))))
	g.Expect(cur.Finalizers).To(ContainElement(cachev1alpha1.Finalizer))

	// Before the pods are ready the Memcached says why it is not.
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWaitingForDeployment))
	}, timeout, interval).Should(Succeed())

	markDeploymentReady(t, mc)
	expectReady(t, mc)
	cur = fetch(g, mc)
	g.Expect(cur.Status.Replicas).To(Equal(int32(3)))
	g.Expect(cur.Status.ReadyReplicas).To(Equal(int32(3)))
	g.Expect(cur.Status.Endpoint).To(Equal("memcached-sample." + ns + ".svc:11211"))
	g.Expect(cur.Status.Selector).To(Equal("app.kubernetes.io/instance=memcached-sample,app.kubernetes.io/name=memcached"))
	g.Expect(condition(g, mc, cachev1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(g, mc, cachev1alpha1.ConditionProgressing).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(condition(g, mc, cachev1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventCreated))
}

// Two Memcacheds in one namespace select only their own pods.
func TestInstancesDoNotShareSelectors(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	a, b := newMemcached(ns, "a", 1), newMemcached(ns, "b", 1)
	g.Expect(k8sClient.Create(testCtx, a)).To(Succeed())
	g.Expect(k8sClient.Create(testCtx, b)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		da, db := fetch(g, deploymentOf(a)), fetch(g, deploymentOf(b))
		g.Expect(da.Spec.Selector.MatchLabels).NotTo(Equal(db.Spec.Selector.MatchLabels))
		g.Expect(da.Spec.Selector.MatchLabels).To(HaveKeyWithValue(resources.LabelInstance, "a"))
	}, timeout, interval).Should(Succeed())
}
