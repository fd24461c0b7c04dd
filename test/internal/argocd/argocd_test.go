package argocd

import (
	"strings"
	"testing"
)

// The matching rules behave as Argo CD's own tests say they do
// (pkg/apis/application/v1alpha1/types_test.go): globs, "!" denials, an
// empty namespace matching only a pattern that allows it, named cluster
// whitelist entries, and normalised source URLs.
func TestRules(t *testing.T) {
	p := Project{
		SourceRepos: []string{"https://github.com/example/*"},
		Destinations: []Destination{
			{Server: "https://prod.k8s.example.com", Namespace: "cache"},
			{Server: "https://*.k8s.example.com", Namespace: "team-*"},
			{Server: "!https://prod.k8s.example.com", Namespace: "scratch"},
		},
		ClusterResourceWhitelist:   []ClusterResource{{Group: "", Kind: "Namespace", Name: "cache"}},
		NamespaceResourceWhitelist: []GroupKind{{Group: "cache.example.com", Kind: "Memcached"}},
	}
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"exact destination", p.DestinationPermitted(Destination{Server: "https://prod.k8s.example.com", Namespace: "cache"}), true},
		{"glob server and namespace", p.DestinationPermitted(Destination{Server: "https://dev.k8s.example.com", Namespace: "team-a"}), true},
		{"empty namespace matches no pattern here", p.DestinationPermitted(Destination{Server: "https://prod.k8s.example.com"}), false},
		{"denied server", p.DestinationPermitted(Destination{Server: "https://prod.k8s.example.com", Namespace: "scratch"}), false},
		{"other server", p.DestinationPermitted(Destination{Server: "https://evil.example.com", Namespace: "cache"}), false},
		{"named cluster resource", p.GroupKindPermitted("", "Namespace", "cache", false), true},
		{"other name", p.GroupKindPermitted("", "Namespace", "kube-system", false), false},
		{"kind not listed", p.GroupKindPermitted("rbac.authorization.k8s.io", "ClusterRoleBinding", "x", false), false},
		{"namespaced kind listed", p.GroupKindPermitted("cache.example.com", "Memcached", "", true), true},
		{"namespaced kind not listed", p.GroupKindPermitted("apps", "Deployment", "", true), false},
		{"unset namespace whitelist allows all", Project{}.GroupKindPermitted("apps", "Deployment", "", true), true},
		{"empty namespace whitelist allows none", Project{NamespaceResourceWhitelist: []GroupKind{}}.GroupKindPermitted("apps", "Deployment", "", true), false},
		{"source by glob, .git and case ignored", p.SourcePermitted("https://GitHub.com/example/memcached-operator.git"), true},
		{"source elsewhere", p.SourcePermitted("https://github.com/other/repo"), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The hook rules behave as gitops-engine's own tests say (hook_test.go,
// helm/hook_test.go, helm/type_test.go).
func TestHookRules(t *testing.T) {
	for _, c := range []struct {
		annotations map[string]string
		hook        bool
		types       string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{"helm.sh/hook": "crd-install"}, false, ""},
		{map[string]string{"helm.sh/hook": "pre-install"}, true, "PreSync"},
		{map[string]string{"helm.sh/hook": "post-install,post-upgrade"}, true, "PostSync,PostSync"},
		{map[string]string{"helm.sh/hook": "pre-delete"}, true, ""},
		{map[string]string{"argocd.argoproj.io/hook": "Skip"}, false, "Skip"},
		{map[string]string{"argocd.argoproj.io/hook": "Sync", "helm.sh/hook": "pre-install"}, true, "Sync"},
	} {
		if got := IsHook(c.annotations); got != c.hook {
			t.Errorf("IsHook(%v) = %v, want %v", c.annotations, got, c.hook)
		}
		if got := strings.Join(HookTypes(c.annotations), ","); got != c.types {
			t.Errorf("HookTypes(%v) = %q, want %q", c.annotations, got, c.types)
		}
	}
}
