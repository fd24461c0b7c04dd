package netpol

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The semantics on the cases the Kubernetes documentation spells out.
func TestSemantics(t *testing.T) {
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(p)
		return []networkingv1.NetworkPolicyPort{{Port: &v}}
	}
	web := Pod{Namespace: "shop", Labels: map[string]string{"app": "web"}}
	db := Pod{Namespace: "shop", Labels: map[string]string{"app": "db"}}
	other := Pod{Namespace: "blog", Labels: map[string]string{"app": "web"}, NamespaceLabels: map[string]string{"team": "blog"}}
	denyAll := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: "shop"}}
	allowWeb := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-to-db", Namespace: "shop"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, Ports: port(5432)}},
	}}
	named := intstr.FromString("postgres")
	allowWebByName := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-to-db-by-name", Namespace: "shop"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, Ports: []networkingv1.NetworkPolicyPort{{Port: &named}}}},
	}}
	namedDB := Pod{Namespace: "shop", Labels: map[string]string{"app": "db"}, Ports: map[string]int32{"postgres": 5433}}
	fromBlog := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "shop"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blog"}}}}}},
	}}
	for _, c := range []struct {
		name     string
		policies []networkingv1.NetworkPolicy
		src, dst Pod
		port     int32
		want     bool
	}{
		{"no policy: open", nil, web, db, 5432, true},
		{"deny all", []networkingv1.NetworkPolicy{denyAll}, web, db, 5432, false},
		{"allowed pod and port", []networkingv1.NetworkPolicy{denyAll, allowWeb}, web, db, 5432, true},
		{"allowed pod, other port", []networkingv1.NetworkPolicy{denyAll, allowWeb}, web, db, 22, false},
		{"a podSelector alone is the policy's namespace", []networkingv1.NetworkPolicy{denyAll, allowWeb}, other, db, 5432, false},
		{"a namespaceSelector alone is every pod there", []networkingv1.NetworkPolicy{denyAll, fromBlog}, other, db, 22, true},
		{"unselected pods stay open", []networkingv1.NetworkPolicy{allowWeb}, db, web, 80, true},
		{"a named port is the pod's port of that name", []networkingv1.NetworkPolicy{denyAll, allowWebByName}, web, namedDB, 5433, true},
		{"a named port is not another port", []networkingv1.NetworkPolicy{denyAll, allowWebByName}, web, namedDB, 5432, false},
		{"a named port selects no pod without it", []networkingv1.NetworkPolicy{denyAll, allowWebByName}, web, db, 5433, false},
	} {
		got, err := Allowed(c.policies, c.src, c.dst, c.port)
		if err != nil || got != c.want {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, c.want)
		}
	}
}
