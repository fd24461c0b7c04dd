// Package olm proves the generated OLM bundle (bundle/, from hack/olm)
// does what OLM would do with it, on a real control plane: OLM itself
// cannot run here (its catalog and bundle-unpack pods need a container
// runtime), so the test applies the CSV's install strategy as OLM's
// install strategy resolver does, and runs the manager under exactly
// those permissions.
package olm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
)

// installNamespace is where OperatorHub installs operators (the global
// OperatorGroup, AllNamespaces).
const installNamespace = "operators"

// The CSV's install strategy, applied as OLM applies it for an
// AllNamespaces OperatorGroup, runs the manager with nothing more than the
// strategy grants: each `permissions` entry becomes a Role and RoleBinding
// in the install namespace, each `clusterPermissions` entry a ClusterRole
// and ClusterRoleBinding, both bound to the ServiceAccount it names, which
// OLM creates; the bundle's CRD and other manifests are applied as they
// are. The manager, running as that ServiceAccount with the environment
// the strategy gives it, makes the CSV's example (the seed's CR) Ready,
// and no request of it is Forbidden.
func TestInstallStrategyRunsTheManager(t *testing.T) {
	manager, c, sample := installAsOLM(t, nil)
	cluster.MarkDeploymentReady(t, c, sample.GetNamespace(), sample.GetName())
	cluster.MarkDisruptionBudgetHealthy(t, c, sample.GetNamespace(), sample.GetName(), 3)
	cluster.WaitMemcachedReady(t, c, sample.GetNamespace(), sample.GetName(), 3)
	if log := strings.ToLower(manager.Log()); strings.Contains(log, "forbidden") {
		t.Errorf("the manager was refused something under the CSV's permissions:\n%s", manager.Log())
	}

	// The check can fail: without `create` on Deployments the same manager
	// is refused, and says so. (A new Memcached's objects are created with
	// a POST; `patch` is for changes.)
	t.Run("a permission short", func(t *testing.T) {
		manager, _, _ := installAsOLM(t, func(s *operatorsv1alpha1.StrategyDetailsDeployment) {
			for i, p := range s.ClusterPermissions {
				for j, r := range p.Rules {
					if slices.Contains(r.Resources, "deployments") {
						s.ClusterPermissions[i].Rules[j].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
					}
				}
			}
		})
		cluster.Eventually(t, 60*time.Second, "the manager to be refused", func() error {
			if !strings.Contains(strings.ToLower(manager.Log()), "forbidden") {
				return errors.New("no Forbidden in the manager's log yet")
			}
			return nil
		})
	})
}

// installAsOLM applies the committed bundle's install strategy (edited
// by edit, if given) to a fresh control plane, starts the manager as its
// ServiceAccount and creates the CSV's example.
func installAsOLM(t *testing.T, edit func(*operatorsv1alpha1.StrategyDetailsDeployment)) (*cluster.Manager, client.Client, *unstructured.Unstructured) {
	t.Helper()
	env := cluster.StartEnvtest(t)
	c := env.Client
	ctx := context.Background()
	dir := filepath.Join(repo.MustRoot(t), "bundle", "manifests")
	csv := readCSV(t, filepath.Join(dir, "memcached-operator.clusterserviceversion.yaml"))

	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNamespace}})
	// The bundle's other manifests: the CRD, Service, unbound ClusterRoles,
	// NetworkPolicies, into the install namespace.
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".clusterserviceversion.yaml") {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(read(t, f)), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(u.GetKind(), "Cluster") {
			u.SetNamespace(installNamespace)
		}
		create(u)
	}
	cluster.Run(t, env.Kubeconfig, nil, bin(t, "kubectl"), "wait", "--for=condition=Established", "crd/memcacheds.cache.example.com", "--timeout=60s")

	strategy := csv.Spec.InstallStrategy.StrategySpec
	if edit != nil {
		edit(&strategy)
	}
	accounts := map[string]bool{}
	for i, p := range strategy.Permissions {
		name := csv.Name + "-" + p.ServiceAccountName + "-" + itoa(i)
		accounts[p.ServiceAccountName] = true
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: installNamespace}, Rules: p.Rules})
		create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: installNamespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: installNamespace}}})
	}
	for i, p := range strategy.ClusterPermissions {
		name := csv.Name + "-" + p.ServiceAccountName + "-cluster-" + itoa(i)
		accounts[p.ServiceAccountName] = true
		create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules})
		create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: installNamespace}}})
	}
	if len(strategy.DeploymentSpecs) != 1 {
		t.Fatalf("the strategy has %d deployments, want the manager's", len(strategy.DeploymentSpecs))
	}
	spec := strategy.DeploymentSpecs[0]
	sa := spec.Spec.Template.Spec.ServiceAccountName
	if len(accounts) != 1 || !accounts[sa] {
		t.Fatalf("the permissions are for %v, the Deployment runs as %s", accounts, sa)
	}
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: installNamespace}})
	// OLM sets the OperatorGroup's target namespaces on the pod template
	// (olm.targetNamespaces: "" for AllNamespaces); the Deployment reads
	// WATCH_NAMESPACES from it.
	spec.Spec.Template.Annotations["olm.targetNamespaces"] = ""
	create(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: installNamespace, Labels: spec.Label}, Spec: spec.Spec})
	container := spec.Spec.Template.Spec.Containers[0]
	watch := ""
	for _, e := range container.Env {
		if e.Name == "WATCH_NAMESPACES" {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
				t.Fatalf("WATCH_NAMESPACES does not come from olm.targetNamespaces: %+v", e)
			}
			watch = spec.Spec.Template.Annotations["olm.targetNamespaces"]
		}
	}
	t.Setenv("WATCH_NAMESPACES", watch)

	// The manager with the strategy's own arguments (but its ports), as
	// that ServiceAccount.
	args := []string{"--metrics-bind-address=0", "--leader-election-namespace=" + installNamespace}
	for _, a := range container.Args {
		if !strings.Contains(a, "-bind-address") {
			args = append(args, a)
		}
	}
	manager := cluster.StartManager(t, cluster.ImpersonatingKubeconfig(t, env.Kubeconfig, installNamespace, sa), args...)

	// The CSV's example, the seed's CR, in an ordinary namespace.
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatal(err)
	}
	sample := &unstructured.Unstructured{Object: examples[0]}
	if sample.GetNamespace() == "" {
		sample.SetNamespace("default")
	}
	create(sample)
	return manager, c, sample
}

func readCSV(t *testing.T, path string) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := sigsyaml.Unmarshal([]byte(read(t, path)), csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bin(t *testing.T, name string) string {
	t.Helper()
	bins, err := repo.Bin(name)
	if err != nil {
		t.Fatal(err)
	}
	return bins[name]
}

func itoa(i int) string { return strconv.Itoa(i) }
