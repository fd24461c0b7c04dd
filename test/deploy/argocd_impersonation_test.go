package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/argocd"
	"github.com/example/memcached-operator/test/internal/helmtemplate"
)

const (
	syncServiceAccountNamespace = "memcached-operator-system"
	syncServiceAccountName      = "memcached-argocd-sync"
)

// syncPermissions are the RBAC rules deploy/argocd/cluster gives the
// ServiceAccount Argo CD impersonates: those that hold everywhere, and
// those that hold in each namespace (by RoleBindings).
type syncPermissions struct {
	cluster     []rbacv1.PolicyRule
	byNamespace map[string][]rbacv1.PolicyRule
}

// readSyncPermissions resolves deploy/argocd/cluster's bindings of the
// sync ServiceAccount to the rules of the roles they reference.
func readSyncPermissions(t *testing.T) syncPermissions {
	t.Helper()
	objs := render(t, "deploy/argocd/cluster")
	if objs["ServiceAccount/"+syncServiceAccountName] == nil {
		t.Fatalf("deploy/argocd/cluster creates no ServiceAccount %s", syncServiceAccountName)
	}
	rules := func(kind, namespace, name string) []rbacv1.PolicyRule {
		id := kind + "/" + name
		if objs[id] == nil || objs[id].GetNamespace() != namespace {
			id = kind + "/" + namespace + "/" + name
		}
		node := objs[id]
		if node == nil {
			t.Fatalf("deploy/argocd/cluster binds %s %s, which it does not define", kind, name)
		}
		var role rbacv1.ClusterRole
		if err := sigsyaml.Unmarshal([]byte(node.MustString()), &role); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return role.Rules
	}
	bindsSyncAccount := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == syncServiceAccountNamespace && s.Name == syncServiceAccountName
		})
	}
	perms := syncPermissions{byNamespace: map[string][]rbacv1.PolicyRule{}}
	for id, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := sigsyaml.Unmarshal([]byte(o.MustString()), &b); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if bindsSyncAccount(b.Subjects) {
				perms.cluster = append(perms.cluster, rules("ClusterRole", "", b.RoleRef.Name)...)
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := sigsyaml.Unmarshal([]byte(o.MustString()), &b); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if bindsSyncAccount(b.Subjects) {
				roleNamespace := b.Namespace
				if b.RoleRef.Kind == "ClusterRole" {
					roleNamespace = ""
				}
				perms.byNamespace[b.Namespace] = append(perms.byNamespace[b.Namespace], rules(b.RoleRef.Kind, roleNamespace, b.RoleRef.Name)...)
			}
		}
	}
	return perms
}

// missing names what the ServiceAccount lacks to sync one object as Argo CD
// does: server-side apply (get, and patch, which the apiserver authorizes
// as a create of that name when the object is new), delete when the object
// may be pruned, escalate for a role (it carries permissions the
// ServiceAccount does not hold), and bind for the role a binding
// references.
func (p syncPermissions) missing(o *yaml.RNode, namespace string) []string {
	group, _, found := strings.Cut(o.GetApiVersion(), "/")
	if !found {
		group = ""
	}
	resource, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: group, Kind: o.GetKind()})
	verbs := []string{"get", "patch", "create"}
	if !strings.Contains(o.GetAnnotations()["argocd.argoproj.io/sync-options"], "Prune=false") {
		verbs = append(verbs, "delete")
	}
	need := []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{resource.Resource}, Verbs: verbs, ResourceNames: []string{o.GetName()}}}
	switch o.GetKind() {
	case "Role", "ClusterRole":
		need = append(need, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{resource.Resource}, Verbs: []string{"escalate"}, ResourceNames: []string{o.GetName()}})
	case "RoleBinding", "ClusterRoleBinding":
		kind, name := yaml.GetValue(o.Field("roleRef").Value.Field("kind").Value), yaml.GetValue(o.Field("roleRef").Value.Field("name").Value)
		roleResource := "clusterroles"
		if kind == "Role" {
			roleResource = "roles"
		}
		need = append(need, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{roleResource}, Verbs: []string{"bind"}, ResourceNames: []string{name}})
	}
	owner := slices.Concat(p.cluster, p.byNamespace[namespace])
	var out []string
	if covered, uncovered := rbacvalidation.Covers(owner, need); !covered {
		for _, r := range uncovered {
			out = append(out, fmt.Sprintf("%v %s/%s %v", r.Verbs, strings.Join(r.APIGroups, ","), strings.Join(r.Resources, ","), r.ResourceNames))
		}
	}
	return out
}

// The ServiceAccount Argo CD syncs as once impersonation is on may do
// exactly what every Application needs: apply and prune every object each
// overlay renders, and the Helm Application's chart. A kind or a name
// added to the overlays without its permission fails here, with the rule to
// add, before a sync fails in a cluster. The e2e test proves the same
// against a real apiserver.
func TestArgoCDSyncServiceAccountCoversTheApplications(t *testing.T) {
	perms := readSyncPermissions(t)
	project := appProjects(t, render(t, "deploy/argocd"))["memcached"]
	want := syncServiceAccountNamespace + ":" + syncServiceAccountName
	if len(project.DestinationServiceAccounts) != 1 || project.DestinationServiceAccounts[0].DefaultServiceAccount != want {
		t.Errorf("the project's destinationServiceAccounts %+v: want one, %s, which deploy/argocd/cluster creates", project.DestinationServiceAccounts, want)
	}
	check := func(t *testing.T, source string, nodes []*yaml.RNode, defaultNamespace string) {
		t.Helper()
		for _, o := range nodes {
			namespace := o.GetNamespace()
			if namespace == "" && isNamespaced(o) {
				namespace = defaultNamespace
			}
			for _, m := range perms.missing(o, namespace) {
				t.Errorf("%s: %s %s/%s: the sync ServiceAccount lacks %s; add it to deploy/argocd/cluster/sync-serviceaccount.yaml", source, o.GetKind(), namespace, o.GetName(), m)
			}
		}
	}
	for _, env := range envs {
		check(t, "overlays/"+env, renderList(t, "overlays/"+env), "")
	}
	helmApp := render(t, "deploy/argocd/helm")["Application/memcached-operator-helm-dev"]
	var app helmApplication
	if err := sigsyaml.Unmarshal([]byte(helmApp.MustString()), &app); err != nil {
		t.Fatal(err)
	}
	r, err := helmtemplate.Template(helmtemplate.Load(t, helmtemplate.Dir(t)), app.Spec.Source.Helm.ReleaseName, app.Spec.Destination.Namespace, app.Spec.Source.Helm.ValuesObject)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kio.FromBytes([]byte(r.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	check(t, "the chart", nodes, app.Spec.Destination.Namespace)

	// What the project's name patterns let through, the ServiceAccount
	// cannot do: bind cluster-admin under an operator-like name, or deploy
	// into another namespace.
	t.Run("mutations are refused", func(t *testing.T) {
		escalation := yaml.MustParse(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: memcached-operator-escalate}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: memcached-operator-controller-manager, namespace: memcached-operator-system}]
`)
		if project.PermitResource("memcached", "rbac.authorization.k8s.io", "ClusterRoleBinding", "memcached-operator-escalate", "", argocd.Destination{Name: "dev"}) != nil {
			t.Error("the project refuses the binding by name: this case no longer shows what impersonation adds")
		}
		m := perms.missing(escalation, "")
		if !slices.ContainsFunc(m, func(s string) bool { return strings.Contains(s, "[bind]") && strings.Contains(s, "cluster-admin") }) {
			t.Errorf("the sync ServiceAccount may bind cluster-admin: missing %v", m)
		}
		if !slices.ContainsFunc(m, func(s string) bool {
			return strings.Contains(s, "patch") && strings.Contains(s, "memcached-operator-escalate")
		}) {
			t.Errorf("the sync ServiceAccount may write a ClusterRoleBinding of any name: missing %v", m)
		}
		elsewhere := yaml.MustParse("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app-cache, namespace: kube-system}\n")
		if m := perms.missing(elsewhere, "kube-system"); len(m) == 0 {
			t.Error("the sync ServiceAccount may deploy into kube-system")
		}
	})
}
