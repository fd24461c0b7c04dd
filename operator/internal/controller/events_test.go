package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// A mutating admission policy (here: a registry mirror that rewrites the
// memcached image, as image-rewriting webhooks do) changes a field the
// operator sets, so every comparison with the live Deployment differs and
// every reconcile applies. Those applies change nothing: the apiserver does
// not move the Deployment's resourceVersion, and the operator reports no
// "Updated" event for them.
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
	rv := fetch(g, deploymentOf(mc)).ResourceVersion
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventCreated))

	// Each annotation change makes the operator reconcile and apply.
	mark := managerRequests.mark()
	for i := range 3 {
		update(t, mc, func(m *cachev1alpha1.Memcached) { m.Annotations = map[string]string{"touched": string(rune('a' + i))} })
		NewWithT(t).Eventually(func() int {
			return len(managerRequests.writesSince(mark, "/namespaces/"+ns+"/deployments/mirrored"))
		}, timeout, interval).Should(BeNumerically(">", i))
	}
	g.Expect(fetch(g, deploymentOf(mc)).ResourceVersion).To(Equal(rv), "the applies changed nothing")
	NewWithT(t).Consistently(func(g Gomega) []string { return eventReasons(g, mc) }, "1s", interval).ShouldNot(ContainElement(EventUpdated))
}
