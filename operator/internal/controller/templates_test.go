package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func deploymentWithTemplate(image string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "m", Namespace: "ns", Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "memcached-operator"}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: image}}},
			},
		},
	}
}

func TestDropPodTemplate(t *testing.T) {
	g := NewWithT(t)
	transform := func(d *appsv1.Deployment) *appsv1.Deployment {
		t.Helper()
		out, err := dropPodTemplate(d)
		g.Expect(err).NotTo(HaveOccurred())
		return out.(*appsv1.Deployment)
	}
	labels := map[string]string{"app": "memcached", "instance": "m", "tier": "cache"}
	d := transform(deploymentWithTemplate("memcached:1", labels))
	g.Expect(d.Spec.Template).To(Equal(corev1.PodTemplateSpec{}), "the template is dropped")
	g.Expect(d.ManagedFields).To(BeNil(), "managedFields are stripped too")
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)), "the rest of the spec stays")
	g.Expect(d.Annotations).To(HaveKeyWithValue("a", "b"))
	fingerprint, ok := cachedWithoutTemplate(d)
	g.Expect(ok).To(BeTrue())

	want, err := templateFingerprint(&deploymentWithTemplate("memcached:1", labels).Spec.Template)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fingerprint).To(Equal(want), "the fingerprint is the one of the template as read")

	// The same template built in another order has the same fingerprint
	// (map keys are sorted); another image has another.
	reordered := map[string]string{"tier": "cache", "instance": "m", "app": "memcached"}
	same, _ := cachedWithoutTemplate(transform(deploymentWithTemplate("memcached:1", reordered)))
	g.Expect(same).To(Equal(fingerprint))
	other, _ := cachedWithoutTemplate(transform(deploymentWithTemplate("memcached:2", labels)))
	g.Expect(other).NotTo(Equal(fingerprint))

	// A second pass keeps the fingerprint of the real template.
	again, _ := cachedWithoutTemplate(transform(d))
	g.Expect(again).To(Equal(fingerprint))

	// Other kinds pass through.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "m"}}
	out, err := dropPodTemplate(svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(BeIdenticalTo(svc))
	_, ok = cachedWithoutTemplate(svc)
	g.Expect(ok).To(BeFalse())
}

func TestVerifiedTemplates(t *testing.T) {
	g := NewWithT(t)
	v := newVerifiedTemplates()
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	g.Expect(v.holds(key, "uid-1", "f1", "h1")).To(BeFalse(), "nothing is verified at start")
	v.verified(key, "uid-1", "f1", "h1")
	g.Expect(v.holds(key, "uid-1", "f1", "h1")).To(BeTrue())
	g.Expect(v.holds(key, "uid-1", "f2", "h1")).To(BeFalse(), "the template changed")
	g.Expect(v.holds(key, "uid-1", "f1", "h2")).To(BeFalse(), "the desired object changed")
	g.Expect(v.holds(key, "uid-2", "f1", "h1")).To(BeFalse(), "another Deployment of the same name")
	v.forget(key)
	g.Expect(v.holds(key, "uid-1", "f1", "h1")).To(BeFalse())
	g.Expect(v.entries).To(BeEmpty())
}
