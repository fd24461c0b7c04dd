// Package deploy proves the deployment paths of the repository: the
// overlays render the same with kustomize's library and CLI, their pins are
// in sync with the Kptfile pipeline, the per-environment deltas are the
// documented ones, and the rendered manifests deploy and run on a live
// apiserver through kubectl, Flux's own apply code, and Argo CD's wiring.
package deploy

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

var envs = []string{"dev", "staging", "prod"}

// kustomizations are every kustomization a user or a GitOps tool builds.
var kustomizations = []string{
	"overlays/dev", "overlays/staging", "overlays/prod",
	"deploy/base", "deploy/install", "deploy/instances", "deploy/argocd", "deploy/argocd/cluster",
	"deploy/flux/clusters/dev", "deploy/flux/clusters/staging", "deploy/flux/clusters/prod",
}

func root(t *testing.T) string { return repo.MustRoot(t) }

// buildKrusty renders a kustomization in-process with kustomize's library,
// with the CLI's default ordering (legacy: namespaces and CRDs first).
func buildKrusty(t *testing.T, dir string) []byte {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root(t), dir))
	if err != nil {
		t.Fatalf("krusty %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func buildCLI(t *testing.T, dir string) []byte {
	t.Helper()
	bins, err := repo.Bin("kustomize")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(root(t), dir))
	if code != 0 {
		t.Fatalf("kustomize build %s: exit %d\n%s", dir, code, stderr)
	}
	return []byte(out)
}

// Every kustomization renders with plain kustomize (no plugins, no
// network), and the library and the CLI agree byte for byte.
func TestKustomizationsRenderIdentically(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			lib, cli := buildKrusty(t, dir), buildCLI(t, dir)
			if !bytes.Equal(lib, cli) {
				t.Errorf("krusty and bin/kustomize differ for %s", dir)
			}
			if len(lib) == 0 {
				t.Errorf("%s renders nothing", dir)
			}
		})
	}
}

// rendered is the output of an overlay, indexed by "Kind/name".
type rendered map[string]*yaml.RNode

func render(t *testing.T, dir string) rendered {
	t.Helper()
	out := rendered{}
	for _, n := range renderList(t, dir) {
		id := n.GetKind() + "/" + n.GetName()
		if _, dup := out[id]; dup {
			id = n.GetKind() + "/" + n.GetNamespace() + "/" + n.GetName()
		}
		out[id] = n
	}
	return out
}

// renderList is every object dir renders, in order.
func renderList(t *testing.T, dir string) []*yaml.RNode {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(buildKrusty(t, dir)), OmitReaderAnnotations: true}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func (r rendered) get(t *testing.T, id string, path ...string) string {
	t.Helper()
	n, ok := r[id]
	if !ok {
		t.Fatalf("%s is not rendered", id)
	}
	v, err := n.Pipe(yaml.Lookup(path...))
	if err != nil || v == nil {
		return ""
	}
	if v.YNode().Kind == yaml.ScalarNode {
		return v.YNode().Value
	}
	return strings.TrimSpace(v.MustString())
}

const (
	manager   = "Deployment/memcached-operator-controller-manager"
	appCache  = "Memcached/app-cache"
	operator  = "registry.example.com/memcached-operator"
	prodImage = operator + ":v0.1.0"
)

// The environments differ exactly as docs/deploy/README.md's table says.
func TestEnvironmentDeltas(t *testing.T) {
	type delta struct {
		managerReplicas, managerImage, debugLogs, managerPDB string
		size, maxMemory, antiAffinity, cachePDB, exporter    string
	}
	want := map[string]delta{
		"dev":     {"1", operator + ":main-3b9e154", "yes", "", "1", "32", "", "", ""},
		"staging": {"2", operator + ":v0.1.0", "no", "", "2", "", "", "", ""},
		"prod":    {"2", prodImage, "no", "1", "3", "", "Hard", "2", "quay.io/prometheus/memcached-exporter:v0.14.4"},
	}
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			r := render(t, "overlays/"+env)
			args := r.get(t, manager, "spec", "template", "spec", "containers", "[name=manager]", "args")
			debug := "no"
			if strings.Contains(args, "--zap-log-level=debug") {
				debug = "yes"
			}
			pdb := ""
			if _, ok := r["PodDisruptionBudget/memcached-operator-controller-manager"]; ok {
				pdb = r.get(t, "PodDisruptionBudget/memcached-operator-controller-manager", "spec", "minAvailable")
			}
			got := delta{
				managerReplicas: r.get(t, manager, "spec", "replicas"),
				managerImage:    r.get(t, manager, "spec", "template", "spec", "containers", "[name=manager]", "image"),
				debugLogs:       debug,
				managerPDB:      pdb,
				size:            r.get(t, appCache, "spec", "size"),
				maxMemory:       r.get(t, appCache, "spec", "memcached", "maxMemoryMB"),
				antiAffinity:    r.get(t, appCache, "spec", "highAvailability", "antiAffinity"),
				cachePDB:        r.get(t, appCache, "spec", "highAvailability", "podDisruptionBudget", "minAvailable"),
				exporter:        r.get(t, appCache, "spec", "monitoring", "exporter", "image"),
			}
			if got != want[env] {
				t.Errorf("%s deltas:\n got %+v\nwant %+v", env, got, want[env])
			}
			// What every environment shares.
			if !strings.Contains(args, "--leader-elect") {
				t.Errorf("the manager must run with --leader-elect")
			}
			if img := r.get(t, appCache, "spec", "image"); img != "memcached:1.6.39-alpine" {
				t.Errorf("memcached image %q, want the pinned memcached:1.6.39-alpine", img)
			}
		})
	}
}

// The manager pod keeps the promises the manager's flags make: it gets
// longer to terminate than the manager takes to drain (or the kubelet kills
// it mid-reconcile, before the leader Lease is released), the Go runtime's
// soft memory limit is derived from the container's limit, and the client
// rate limit comes with its burst.
func TestManagerPodSettings(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			r := render(t, "overlays/"+env)
			d := &appsv1.Deployment{}
			if err := yamlToObject(r[manager].MustString(), d); err != nil {
				t.Fatal(err)
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			shutdown := 30 * time.Second // controller-runtime's default
			flags := map[string]string{}
			for _, a := range c.Args {
				if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
					flags[k] = v
				}
			}
			if v, ok := flags["graceful-shutdown-timeout"]; ok {
				var err error
				if shutdown, err = time.ParseDuration(v); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Errorf("--graceful-shutdown-timeout is not set explicitly")
			}
			grace := time.Duration(ptr.Deref(pod.TerminationGracePeriodSeconds, 30)) * time.Second
			if grace < shutdown+5*time.Second {
				t.Errorf("terminationGracePeriodSeconds %v leaves no margin over --graceful-shutdown-timeout %v", grace, shutdown)
			}
			if flags["kube-api-qps"] == "" || flags["kube-api-burst"] == "" {
				t.Errorf("--kube-api-qps and --kube-api-burst go together: %v", c.Args)
			}
			var memoryLimit bool
			for _, e := range c.Env {
				switch e.Name {
				case "GOMEMLIMIT":
					t.Errorf("GOMEMLIMIT at the container limit leaves no headroom; the manager derives it from MEMORY_LIMIT")
				case "MEMORY_LIMIT":
					memoryLimit = e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
				}
			}
			if !memoryLimit {
				t.Errorf("MEMORY_LIMIT must come from the container's limits.memory")
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("the manager has no memory limit to derive its soft limit from")
			}
		})
	}
}
