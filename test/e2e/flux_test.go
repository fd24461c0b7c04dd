package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/flux"
	"github.com/example/memcached-operator/test/internal/gitserver"
	"github.com/example/memcached-operator/test/internal/guide"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

const upstreamURL = "https://github.com/example/memcached-operator"

// Flux itself (source-controller and kustomize-controller from bin/)
// reconciles deploy/flux/clusters/<env> exactly as committed, from a clone
// of this repository served over Git's smart HTTP, into a kwok cluster. The
// only change is the repository URL, committed in the clone as a fork would
// have it, so Flux's self-sync (flux-system) applies the same. The clone is
// tagged v0.1.0, the release staging and prod follow. Every Kustomization
// and Memcached must become Ready; in dev, a `make pin` commit must reach the
// cache's Deployment, an instance removed from Git must be pruned while
// the CRD and the namespaces stay, and the guide's removal must remove
// everything (removeWithFlux).
func TestFluxReconcilesTheRepository(t *testing.T) {
	t.Parallel() // fake nodes only: see the package comment
	bins, err := repo.Bin("kubectl", "kustomize", "manager")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range environments {
		t.Run(e.env, func(t *testing.T) {
			server := gitserver.Start(t)
			work := gitserver.Snapshot(t, repo.MustRoot(t))
			url := server.URL + "/memcached-operator.git"
			rewriteFluxURL(t, work, url)
			gitserver.Git(t, work, "commit", "-qam", "Flux: the test's Git server")
			gitserver.Git(t, work, "tag", "v0.1.0")
			server.Publish(t, work, "memcached-operator")
			if err := os.Symlink(filepath.Dir(bins["manager"]), filepath.Join(work, "bin")); err != nil {
				t.Fatal(err)
			}

			k := cluster.StartLocal(t, "flux-"+e.env, 3)
			k.DumpOnFailure(t)
			if e.env == "prod" {
				platform.Prepare(t, k.Kubeconfig)
				certmanager.Start(t, k.Kubeconfig)
			}
			c := k.Client(t)
			ctrl := flux.Start(t, k.Kubeconfig)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("kustomize-controller:\n%s", tail(ctrl.Kustomize.Output(), 30))
					t.Logf("source-controller:\n%s", tail(ctrl.Source.Output(), 30))
				}
			})

			// What `flux bootstrap` does after installing the controllers:
			// apply the cluster's directory once. From then on Flux applies
			// it itself, from Git.
			start := time.Now()
			stdout, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(work, "deploy", "flux", "clusters", e.env))
			if code != 0 {
				t.Fatalf("kustomize build: %s", stderr)
			}
			cluster.Run(t, k.Kubeconfig, []byte(stdout), bins["kubectl"], "apply", "--server-side", "-f", "-")

			waitFluxReady(t, c, "Kustomization", "flux-system", "memcached-crds", "memcached-operator")
			var pod types.NamespacedName
			cluster.Eventually(t, time.Minute, "a Running manager pod", func() (err error) {
				pod, err = cluster.ManagerPod(context.Background(), c)
				return err
			})
			cluster.StartManagerAsPod(t, cluster.ImpersonatingKubeconfig(t, k.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount), pod,
				"--leader-elect", "--leader-election-namespace="+names.OperatorNamespace, "--metrics-bind-address=0")
			waitFluxReady(t, c, "Kustomization", "memcached-instances")
			cluster.WaitMemcachedReady(t, c, "cache", "app-cache", e.cacheSize)
			t.Logf("%s: Flux reconciled every Kustomization Ready in %v", e.env, time.Since(start).Round(100*time.Millisecond))
			if e.env != "dev" {
				return
			}

			// A pin, committed and pushed, reaches the cache's pods.
			out, code := pin(t, work, "dev", "memcached:1.6.38-alpine")
			if code != 0 {
				t.Fatalf("pins pin: %s", out)
			}
			gitserver.Git(t, work, "commit", "-qam", "dev: memcached 1.6.38")
			commit := time.Now()
			gitserver.Push(t, work)
			requestReconcile(t, c, "memcached-operator")
			cluster.Eventually(t, waitFor, "the pinned image to reach the Deployment", func() error {
				d := deployment(t, c, "cache", "app-cache")
				if img := d.Spec.Template.Spec.Containers[0].Image; img != "memcached:1.6.38-alpine" {
					return fmt.Errorf("image %s", img)
				}
				return nil
			})
			cluster.WaitMemcachedReady(t, c, "cache", "app-cache", e.cacheSize)
			t.Logf("dev: commit to converged (the pin on every cache pod, Memcached Ready): %v", time.Since(commit).Round(100*time.Millisecond))

			// A new instance goes in, then out: pruned, and its objects
			// with it; the cache namespace is removed from Git too, and
			// survives (prune: disabled), as does the CRD.
			addInstance(t, work)
			gitserver.Git(t, work, "add", "-A")
			gitserver.Git(t, work, "commit", "-qm", "dev: a session cache")
			gitserver.Push(t, work)
			requestReconcile(t, c, "memcached-operator")
			cluster.WaitMemcachedReady(t, c, "cache", "sessions", 1)

			removeInstanceAndCacheNamespace(t, work)
			gitserver.Git(t, work, "commit", "-qam", "dev: no session cache, no cache namespace in Git")
			pruned := time.Now()
			gitserver.Push(t, work)
			requestReconcile(t, c, "memcached-operator")
			cluster.Eventually(t, waitFor, "the removed instance to be pruned with what it owned", func() error {
				if _, err := cluster.Memcached(c, "cache", "sessions"); !apierrors.IsNotFound(err) {
					return fmt.Errorf("Memcached sessions: %w", err)
				}
				if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cache", Name: "sessions"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("Deployment sessions: %w", err)
				}
				if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cache", Name: "allow-memcached-clients"}, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the cache namespace's NetworkPolicy, removed from Git, is still there: %w", err)
				}
				return nil
			})
			t.Logf("dev: removed from Git to pruned: %v", time.Since(pruned).Round(100*time.Millisecond))
			waitFluxReady(t, c, "Kustomization", "memcached-operator", "memcached-instances")
			for _, name := range []string{"cache", names.OperatorNamespace} {
				ns := &corev1.Namespace{}
				if err := c.Get(context.Background(), types.NamespacedName{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
					t.Errorf("namespace %s did not survive: %v", name, err)
				}
			}
			if _, err := cluster.Memcached(c, "cache", "app-cache"); err != nil {
				t.Errorf("app-cache did not survive: %v", err)
			}
			if err := c.Get(context.Background(), types.NamespacedName{Name: "memcacheds.cache.example.com"}, crdObject()); err != nil {
				t.Errorf("the CRD did not survive: %v", err)
			}

			removeWithFlux(t, c, k.Kubeconfig, work)
		})
	}
}

// fluxGuide is the Flux guide, whose removal steps removeWithFlux follows.
const fluxGuide = "docs/deploy/flux.md"

// removeWithFlux removes the operator from the cluster as the guide's
// two commits do: the caches first, while the operator still releases
// their finalizer, then the operator; then deletes what no prune takes.
func removeWithFlux(t *testing.T, c client.Client, kubeconfig, work string) {
	t.Helper()
	ctx := context.Background()
	wiring := filepath.Join(work, "deploy", "flux", "clusters", "dev", "kustomization.yaml")
	start := time.Now()
	editFile(t, wiring, "patches:\n", "patches:\n"+guide.Fenced(t, fluxGuide, "yaml", "name: memcached-instances"))
	gitserver.Git(t, work, "commit", "-qam", "dev: remove the caches")
	gitserver.Push(t, work)
	requestReconcile(t, c, "flux-system")
	guide.Run(t, kubeconfig, fluxGuide, "kubectl wait --for=delete memcached")
	waitFluxGone(t, c, "memcached-instances")
	t.Logf("dev: the caches removed through Flux in %v", time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	if err := os.WriteFile(wiring, []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-system\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitserver.Git(t, work, "commit", "-qam", "dev: remove the operator")
	gitserver.Push(t, work)
	requestReconcile(t, c, "flux-system")
	waitFluxGone(t, c, "memcached-operator", "memcached-crds")
	cluster.Eventually(t, waitFor, "the manager Deployment to be deleted", func() error {
		err := c.Get(ctx, types.NamespacedName{Namespace: names.OperatorNamespace, Name: names.ManagerDeployment}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
	deleteWhatGitOpsLeaves(t, c, kubeconfig)
	t.Logf("dev: the operator, its CRD and namespaces removed in %v", time.Since(start).Round(100*time.Millisecond))
}

// waitFluxGone waits for Kustomizations to be deleted, their
// garbage collection done.
func waitFluxGone(t *testing.T, c client.Client, names ...string) {
	t.Helper()
	for _, name := range names {
		cluster.Eventually(t, 3*time.Minute, "Kustomization "+name+" deleted", func() error {
			err := c.Get(context.Background(), types.NamespacedName{Namespace: "flux-system", Name: name}, fluxObject("Kustomization"))
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
	}
}

// rewriteFluxURL points every Flux source of the clone at the test server.
func rewriteFluxURL(t *testing.T, work, url string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(work, "deploy", "flux"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "url: "+upstreamURL, "url: "+url)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pin runs `make pin`'s command, bin/pins, on the snapshot work.
func pin(t *testing.T, work string, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := run.Command(t, nil, filepath.Join(work, "bin", "pins"), append([]string{"-C", work, "pin"}, args...)...)
	return stdout + stderr, code
}

func addInstance(t *testing.T, work string) {
	t.Helper()
	dir := filepath.Join(work, "overlays", "dev", "instances")
	if err := os.WriteFile(filepath.Join(dir, "sessions.yaml"), []byte(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: sessions
  namespace: cache
  annotations:
    argocd.argoproj.io/sync-wave: "1"
    argocd.argoproj.io/sync-options: SkipDryRunOnMissingResource=true
spec:
  size: 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	editFile(t, filepath.Join(dir, "kustomization.yaml"), "- ../../../deploy/instances\n", "- ../../../deploy/instances\n- sessions.yaml\n")
}

func removeInstanceAndCacheNamespace(t *testing.T, work string) {
	t.Helper()
	editFile(t, filepath.Join(work, "overlays", "dev", "instances", "kustomization.yaml"), "- sessions.yaml\n", "")
	editFile(t, filepath.Join(work, "overlays", "dev", "operator", "kustomization.yaml"), "- ../../../deploy/cache-namespace\n", "")
}

func editFile(t *testing.T, path, old, replacement string) {
	t.Helper()
	b := run.ReadFile(t, path)
	if !strings.Contains(b, old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(b, old, replacement, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// requestReconcile is `flux reconcile source git NAME`: Flux reconciles an
// object at once when its reconcile.fluxcd.io/requestedAt annotation
// changes, as a webhook Receiver would make it.
func requestReconcile(t *testing.T, c client.Client, name string) {
	t.Helper()
	obj := fluxObject("GitRepository")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano))
	obj.SetNamespace("flux-system")
	obj.SetName(name)
	if err := c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func fluxObject(kind string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	switch kind {
	case "GitRepository":
		obj.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	default:
		obj.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	}
	obj.SetKind(kind)
	return obj
}

// waitFluxReady waits for Flux objects to be Ready for their generation.
func waitFluxReady(t *testing.T, c client.Client, kind string, names ...string) {
	t.Helper()
	for _, name := range names {
		cluster.Eventually(t, 3*time.Minute, kind+" "+name+" Ready", func() error {
			obj := fluxObject(kind)
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "flux-system", Name: name}, obj); err != nil {
				return err
			}
			gen, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
			if gen != obj.GetGeneration() {
				return fmt.Errorf("observedGeneration %d of %d", gen, obj.GetGeneration())
			}
			return cluster.MemcachedCondition(obj, "Ready", "True", "")
		})
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
