package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/kustomize"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/kpt"
	"github.com/example/memcached-operator/test/internal/repo"
)

// Flux's path with Flux's own code: kustomize-controller builds the
// overlay with github.com/fluxcd/pkg/kustomize (its generator and secure
// build, on a checkout of the repository), applies the result in stages
// with github.com/fluxcd/pkg/ssa, and then waits until every object is
// Current by kstatus. The operator runs, so the Memcached's Ready condition
// is what the health check reads.
func TestFluxAppliesOverlays(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			c := cluster.StartEnvtest(t)
			ctx := context.Background()

			// The Flux Kustomization this cluster would run.
			fluxKs := readFluxKustomization(t, env)
			checkout := checkoutRepository(t)
			dir := filepath.Join(checkout, filepath.Clean(fluxKs.Spec.Path))
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fluxKs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kustomize.NewGenerator(checkout, unstructured.Unstructured{Object: u}).WriteFile(dir); err != nil {
				t.Fatalf("flux generator: %v", err)
			}
			resMap, err := kustomize.SecureBuild(checkout, dir, false)
			if err != nil {
				t.Fatalf("flux build: %v", err)
			}
			manifests, err := resMap.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			objects, err := ssautils.ReadObjects(bytesReader(manifests))
			if err != nil {
				t.Fatal(err)
			}

			rm := resourceManager(t, c.Config)
			rm.SetOwnerLabels(objects, fluxKs.Name, fluxKs.Namespace)
			changes, err := rm.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions())
			if err != nil {
				t.Fatalf("ApplyAllStaged: %v", err)
			}
			for _, e := range changes.Entries {
				if e.Action != ssa.CreatedAction {
					t.Errorf("%s: %s on a fresh cluster", e.Subject, e.Action)
				}
			}

			// The operator (out of cluster) and the controllers envtest lacks.
			cluster.StartManager(t, c.Kubeconfig, "--metrics-bind-address=0")
			cluster.MarkDeploymentReady(t, c.Client, operatorNamespace, serviceAccount)
			cluster.MarkDeploymentReady(t, c.Client, cacheNamespace, "app-cache")
			if env == "prod" {
				cluster.MarkDisruptionBudgetHealthy(t, c.Client, operatorNamespace, serviceAccount, 2)
			}
			if err := rm.WaitForSetWithContext(ctx, changes.ToObjMetadataSet(), ssa.WaitOptions{Interval: 250 * time.Millisecond, Timeout: 60 * time.Second}); err != nil {
				t.Fatalf("Flux health check (kstatus): %v", err)
			}

			// The next reconciliation finds nothing to do.
			again, err := rm.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range again.Entries {
				if e.Action != ssa.UnchangedAction {
					t.Errorf("second reconciliation: %s %s", e.Subject, e.Action)
				}
			}
		})
	}
}

// The Flux objects in deploy/flux are valid against Flux's own CRDs,
// generated at test time by controller-gen from the API modules Flux
// releases, and accepted by a server-side dry run.
func TestFluxObjectsAreValid(t *testing.T) {
	bins, err := repo.Bin("controller-gen", "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	crds := t.TempDir()
	gen := exec.Command(bins["controller-gen"], "crd",
		"paths=github.com/fluxcd/source-controller/api/v1",
		"paths=github.com/fluxcd/kustomize-controller/api/v1",
		"output:crd:dir="+crds)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen on the Flux API modules: %v\n%s", err, out)
	}
	c := cluster.StartEnvtest(t)
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", crds)
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--all", "crd", "--timeout=60s")
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "create", "namespace", "flux-system")
	for _, env := range envs {
		out := cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "--dry-run=server", "-k", "deploy/flux/clusters/"+env)
		t.Logf("%s: %s", env, out)
	}
}

func readFluxKustomization(t *testing.T, env string) *kustomizev1.Kustomization {
	t.Helper()
	nodes := render(t, "deploy/flux/clusters/"+env)
	ks := &kustomizev1.Kustomization{}
	n, ok := nodes["Kustomization/memcached-"+env]
	if !ok {
		t.Fatalf("deploy/flux/clusters/%s has no Kustomization memcached-%s", env, env)
	}
	if err := yamlToObject(n.MustString(), ks); err != nil {
		t.Fatal(err)
	}
	src, ok := nodes["GitRepository/"+ks.Spec.SourceRef.Name]
	if !ok {
		t.Fatalf("the Kustomization's source %s is not in deploy/flux/clusters/%s", ks.Spec.SourceRef.Name, env)
	}
	repoObj := &sourcev1.GitRepository{}
	if err := yamlToObject(src.MustString(), repoObj); err != nil {
		t.Fatal(err)
	}
	if !ks.Spec.Prune || ks.Spec.Wait != true || ks.Spec.Timeout == nil || ks.Spec.RetryInterval == nil {
		t.Errorf("Kustomization memcached-%s must prune, wait, and set timeout and retryInterval", env)
	}
	return ks
}

// checkoutRepository stands in for source-controller's artifact: the parts
// of the repository the GitRepository's ignore rules let through.
func checkoutRepository(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var copyTree func(from, to string)
	copyTree = func(from, to string) {
		entries, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := kpt.CopyPackage(from, to); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				copyTree(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			}
		}
	}
	for _, sub := range []string{"deploy", "overlays"} {
		copyTree(filepath.Join(root(t), sub), filepath.Join(dir, sub))
	}
	return dir
}

func resourceManager(t *testing.T, cfg *rest.Config) *ssa.ResourceManager {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	return ssa.NewResourceManager(c, poller, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
}
