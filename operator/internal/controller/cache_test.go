package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCacheOptions(t *testing.T) {
	g := NewWithT(t)

	all := CacheOptions(nil)
	g.Expect(all.DefaultNamespaces).To(BeNil(), "no namespaces means the whole cluster")
	g.Expect(all.DefaultTransform).NotTo(BeNil(), "managedFields must be stripped")
	managed := labels.Set{"app.kubernetes.io/managed-by": "memcached-operator"}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		var found bool
		for o, byObject := range all.ByObject {
			if sameType(o, obj) {
				found = true
				g.Expect(byObject.Label.Matches(managed)).To(BeTrue())
				g.Expect(byObject.Label.Matches(labels.Set{"app": "other"})).To(BeFalse(), "other %T must stay out of the cache", obj)
			}
		}
		g.Expect(found).To(BeTrue(), "%T is cached without a label selector", obj)
	}

	scoped := CacheOptions([]string{"team-a", "team-b"})
	g.Expect(scoped.DefaultNamespaces).To(HaveLen(2))
	g.Expect(scoped.DefaultNamespaces).To(HaveKey("team-a"))
	g.Expect(scoped.DefaultNamespaces).To(HaveKey("team-b"))
}

func sameType(a, b client.Object) bool {
	switch a.(type) {
	case *appsv1.Deployment:
		_, ok := b.(*appsv1.Deployment)
		return ok
	case *corev1.Service:
		_, ok := b.(*corev1.Service)
		return ok
	case *policyv1.PodDisruptionBudget:
		_, ok := b.(*policyv1.PodDisruptionBudget)
		return ok
	}
	return false
}
