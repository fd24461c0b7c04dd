//go:build !unit

package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// A mutating admission policy (here: a registry mirror that rewrites the
// memcached image, as image-rewriting webhooks do) changes a field the
// operator sets, so a comparison of the live Deployment with the desired one
// differs. The operator remembers the template its own apply produced and
// does not apply again while the template is that one; a manager that does
// not remember it (restarted) applies once. That apply changes nothing: the
// apiserver does not move the Deployment's resourceVersion, and the operator
// reports no "Updated" event for it.
func TestAppliesThatChangeNothingAreNotEvents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	const mirror = "mirror.example.com/library/memcached:1.6.39-alpine"
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "mirror-" + ns},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}},
			},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "replace", path: "/spec/template/spec/containers/0/image", value: "` + mirror + `"}]`},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy.Name},
	}
	g.Expect(k8sClient.Create(testCtx, policy)).To(Succeed())
	g.Expect(k8sClient.Create(testCtx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = k8sClient.Delete(testCtx, binding)
		_ = k8sClient.Delete(testCtx, policy)
	})
	// Policies take effect once the apiserver has loaded them.
	probe := newMemcached(ns, "probe", 1)
	g.Expect(k8sClient.Create(testCtx, probe)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) string {
		d := fetch(g, deploymentOf(probe))
		if d.Spec.Template.Spec.Containers[0].Image != mirror {
			// Change the size, so the operator applies again.
			cur := fetch(g, probe)
			cur.Spec.Size = ptr.To(3 - *cur.Spec.Size)
			g.Expect(k8sClient.Update(testCtx, cur)).To(Succeed())
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}, timeout, 500*time.Millisecond).Should(Equal(mirror))

	mc := newMemcached(ns, "mirrored", 1)
	createReady(t, mc)
	g.Expect(fetch(g, deploymentOf(mc)).Spec.Template.Spec.Containers[0].Image).To(Equal(mirror))
	generation := fetch(g, deploymentOf(mc)).Generation
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventCreated))

	// The apply's answer, with the mirror's image, is the template the
	// operator remembers for this desired object: applying it again would
	// change nothing, so reconciles that follow do not.
	mark := managerRequests.mark()
	for range 3 {
		_, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(managerRequests.writesSince(mark, "/namespaces/"+ns+"/deployments/mirrored")).To(BeEmpty())

	// A restarted manager remembers nothing: it reads the Deployment, finds
	// another image than its own and applies. That apply changes nothing
	// the operator sets, and it is not reported as an update. (It does
	// write once: the operator created the Deployment with a POST, and its
	// first apply adds the apply's managedFields entry.)
	restart := func() {
		t.Helper()
		restarted := &MemcachedReconciler{Client: reconciler.Client, APIReader: reconciler.APIReader, Recorder: reconciler.Recorder, Defaults: testDefaults}
		for range 2 {
			_, err := restarted.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	restart()
	g.Expect(managerRequests.writesSince(mark, "/namespaces/"+ns+"/deployments/mirrored")).To(HaveLen(1), "one apply, then its answer is remembered")
	applied := fetch(g, deploymentOf(mc))
	g.Expect(applied.Generation).To(Equal(generation), "the apply changed nothing the operator sets")
	restart()
	g.Expect(managerRequests.writesSince(mark, "/namespaces/"+ns+"/deployments/mirrored")).To(HaveLen(2))
	g.Expect(fetch(g, deploymentOf(mc)).ResourceVersion).To(Equal(applied.ResourceVersion), "the second apply changed nothing at all")
	NewWithT(t).Consistently(func(g Gomega) []string { return eventReasons(g, mc) }, "1s", interval).ShouldNot(ContainElement(EventUpdated))
}
