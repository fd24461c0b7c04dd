package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/argocd"
	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/gitserver"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Argo CD itself (bin/argocd: the application controller, the
// ApplicationSet controller, the repo-server and the API server, with
// redis) on a hub cluster, with dev, staging and prod registered under
// their names, does what docs/deploy/argocd.md tells a user to do, step for
// step: set the repository URL in deploy/argocd/settings/settings.yaml,
// apply deploy/argocd, sync prod with the CLI. Every Application's first
// sync must succeed without a retry (the sync waves order the CRD, the
// operator and the caches within it), dev and staging by themselves and
// prod on request; then self-heal, prune, the health check's states, and a
// promotion by release tag are watched as they happen.
func TestArgoCDReconcilesTheRepository(t *testing.T) {
	t.Parallel() // fake nodes only: see the package comment
	bins, err := repo.Bin("kubectl", "manager")
	if err != nil {
		t.Fatal(err)
	}
	clusters := createClusters(t, "argocd-", map[string]int{"hub": 0, "dev": 3, "staging": 3, "prod": 3}) // prod's cache of 3 spreads one pod per node
	platform.Prepare(t, clusters["prod"].Kubeconfig)
	certmanager.Start(t, clusters["prod"].Kubeconfig)
	hub := clusters["hub"]
	hub.DumpOnFailure(t)
	hubClient := hub.Client(t)

	start := time.Now()
	argo := argocd.Start(t, hub.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range []string{"argocd-application-controller", "argocd-applicationset-controller", "argocd-repo-server"} {
				t.Logf("%s:\n%s", c, tail(argo.Output(c), 40))
			}
		}
	})
	t.Logf("Argo CD up in %v", time.Since(start).Round(100*time.Millisecond))

	// The fork: a clone served over smart HTTP, its URL set in the one
	// place the docs name, and the release tag staging and prod follow.
	server := gitserver.Start(t)
	work := gitserver.Snapshot(t, repo.MustRoot(t))

	// Registering a cluster: its Secret in Argo CD, and the ServiceAccount
	// syncs will run as once impersonation is on.
	for _, env := range envNames {
		argo.RegisterCluster(t, env, clusters[env].Kubeconfig)
		cluster.Run(t, clusters[env].Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "--field-manager="+argocd.FieldManager,
			"-k", filepath.Join(work, "deploy", "argocd", "cluster"))
		clusters[env].DumpOnFailure(t)
	}
	url := server.URL + "/memcached-operator.git"
	editFile(t, filepath.Join(work, "deploy", "argocd", "settings", "settings.yaml"),
		"repoURL: https://github.com/example/memcached-operator.git", "repoURL: "+url)
	gitserver.Git(t, work, "commit", "-qam", "Argo CD: the fork's repository URL")
	gitserver.Git(t, work, "tag", "v0.1.0")
	server.Publish(t, work, "memcached-operator")
	// make pin runs from the clone with this repository's bin/, which Git
	// must not see.
	if err := os.Symlink(filepath.Dir(bins["manager"]), filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".git", "info", "exclude"), []byte("/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The operator runs as a process per cluster, as the ServiceAccount
	// the sync creates, once the Deployment has a pod (kwok's).
	managers := map[string]bool{}
	startManagers := func() {
		for _, env := range envNames {
			if managers[env] {
				continue
			}
			// As the container of one of the Deployment's kwok pods, so
			// that it takes the reloader image from it.
			pod, err := cluster.ManagerPod(context.Background(), clusters[env].Client(t))
			if err != nil {
				continue
			}
			managers[env] = true
			cluster.StartManagerAsPod(t, cluster.ImpersonatingKubeconfig(t, clusters[env].Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount), pod,
				"--leader-elect", "--leader-election-namespace="+names.OperatorNamespace, "--metrics-bind-address=0")
		}
	}

	applied := time.Now()
	argo.Apply(t, filepath.Join(work, "deploy", "argocd"))
	for _, env := range []string{"dev", "staging"} {
		waitApplication(t, hubClient, "memcached-"+env, "Healthy", startManagers)
		t.Logf("%s: Synced and Healthy %v after the apply", env, time.Since(applied).Round(100*time.Millisecond))
	}
	if got := applicationStatus(t, hubClient, "memcached-prod"); got.sync != "OutOfSync" {
		t.Errorf("prod before anyone synced it: %s, want OutOfSync", got)
	}
	synced := time.Now()
	argo.CLI(t, "app", "sync", "memcached-prod", "--timeout=300")
	waitApplication(t, hubClient, "memcached-prod", "Healthy", startManagers)
	t.Logf("prod: Synced and Healthy %v after `argocd app sync`", time.Since(synced).Round(100*time.Millisecond))
	for _, env := range envNames {
		if st := applicationStatus(t, hubClient, "memcached-"+env); st.retries != 0 || st.phase != "Succeeded" {
			t.Errorf("%s: first sync %s after %d retries (%s); the waves must order it without a retry", env, st.phase, st.retries, st.message)
		}
		checkWaveOrder(t, clusters[env].Client(t), env)
	}

	// Impersonation on, as the docs' opt-in: from here on every sync and
	// server-side diff runs as memcached-argocd-sync in each cluster.
	dev := clusters["dev"].Client(t)
	wiring := filepath.Join(work, "deploy", "argocd", "kustomization.yaml")
	editFile(t, wiring, "# - impersonation\n", "- impersonation\n")
	gitserver.Git(t, work, "commit", "-qam", "Argo CD: sync as memcached-argocd-sync")
	gitserver.Push(t, work)
	argo.Apply(t, filepath.Join(work, "deploy", "argocd"))

	// Self-heal: a hand edit in dev is undone.
	scaled := time.Now()
	cluster.Run(t, clusters["dev"].Kubeconfig, nil, bins["kubectl"], "scale", "-n", "cache", "memcached/app-cache", "--replicas=4")
	cluster.Eventually(t, 2*time.Minute, "self-heal to undo `kubectl scale`", func() error {
		mc, err := cluster.Memcached(dev, "cache", "app-cache")
		if err != nil {
			return err
		}
		if size, _, _ := unstructured.NestedInt64(mc.Object, "spec", "size"); size != 1 {
			return fmt.Errorf("size %d", size)
		}
		return nil
	})
	t.Logf("dev: self-heal undid `kubectl scale` in %v", time.Since(scaled).Round(100*time.Millisecond))

	// Prune: an instance added in Git arrives, then goes when removed.
	addInstance(t, work)
	gitserver.Git(t, work, "add", "-A")
	gitserver.Git(t, work, "commit", "-qm", "dev: a session cache")
	gitserver.Push(t, work)
	refreshDev(t, hubClient)
	cluster.WaitMemcachedReady(t, dev, "cache", "sessions", 1)
	editFile(t, filepath.Join(work, "overlays", "dev", "instances", "kustomization.yaml"), "- sessions.yaml\n", "")
	gitserver.Git(t, work, "commit", "-qam", "dev: no session cache")
	pruned := time.Now()
	gitserver.Push(t, work)
	refreshDev(t, hubClient)
	cluster.Eventually(t, 2*time.Minute, "the removed instance to be pruned with its Deployment", func() error {
		if _, err := cluster.Memcached(dev, "cache", "sessions"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Memcached sessions: %w", err)
		}
		if err := dev.Get(context.Background(), types.NamespacedName{Namespace: "cache", Name: "sessions"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Deployment sessions: %w", err)
		}
		return nil
	})
	t.Logf("dev: removed from Git to pruned: %v", time.Since(pruned).Round(100*time.Millisecond))
	waitApplication(t, hubClient, "memcached-dev", "Healthy", nil)

	// A merged change the project's name patterns let through, binding
	// cluster-admin to the operator, is refused by the apiserver: the
	// ServiceAccount may write only the operator's own bindings, by name,
	// and bind only the operator's own roles.
	escalation := filepath.Join(work, "overlays", "dev", "operator", "escalate.yaml")
	if err := os.WriteFile(escalation, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: memcached-operator-escalate
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: memcached-operator-controller-manager, namespace: memcached-operator-system}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	operatorKustomization := filepath.Join(work, "overlays", "dev", "operator", "kustomization.yaml")
	editFile(t, operatorKustomization, "- ../../../deploy/cache-namespace\n", "- ../../../deploy/cache-namespace\n- escalate.yaml\n")
	gitserver.Git(t, work, "add", "-A")
	gitserver.Git(t, work, "commit", "-qm", "dev: cluster-admin for the operator")
	gitserver.Push(t, work)
	refreshDev(t, hubClient)
	cluster.Eventually(t, 2*time.Minute, "the sync of the binding to fail", func() error {
		if msg := resourceSyncFailure(t, hubClient, "memcached-dev", "ClusterRoleBinding", "memcached-operator-escalate"); msg == "" {
			return fmt.Errorf("%s", applicationStatus(t, hubClient, "memcached-dev"))
		}
		return nil
	})
	if err := dev.Get(context.Background(), types.NamespacedName{Name: "memcached-operator-escalate"}, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding to cluster-admin exists in dev (%v)", err)
	}
	// Argo CD v3.6.2 reports this refusal as a recovered kubectl panic
	// (its dry run goes through `kubectl auth reconcile`, which panics on a
	// forbidden impersonated request: argo-cd#28607). The apiserver's own
	// reason, for the same identity and object applied server-side:
	stdout, stderr, code := run.Command(t, nil, bins["kubectl"], "--kubeconfig", clusters["dev"].Kubeconfig, "apply", "--server-side", "--dry-run=server",
		"--as=system:serviceaccount:memcached-operator-system:memcached-argocd-sync", "-f", escalation)
	if want := `"memcached-operator-escalate" is forbidden: User "system:serviceaccount:memcached-operator-system:memcached-argocd-sync"`; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("the apiserver let the sync ServiceAccount bind cluster-admin (exit %d), or refused it for another reason than %s: %s%s", code, want, stdout, stderr)
	}
	gitserver.Git(t, work, "revert", "--no-edit", "HEAD")
	gitserver.Push(t, work)
	refreshDev(t, hubClient)
	waitApplication(t, hubClient, "memcached-dev", "Healthy", nil)
	t.Logf("dev: the apiserver refused a binding to cluster-admin; the revert synced")

	// The health check in each state, from Git changes: a cache larger
	// than the nodes can spread is Degraded with the operator's reason, a
	// paused one Suspended (a paused cache whose pods cannot run stays
	// Degraded), and back to Healthy.
	kustomization := filepath.Join(work, "overlays", "dev", "instances", "kustomization.yaml")
	original := run.ReadFile(t, kustomization)
	// commitDev commits the original kustomization with pairs of (old,
	// new) text replaced.
	commitDev := func(msg string, edits ...string) {
		t.Helper()
		text := original
		for i := 0; i+1 < len(edits); i += 2 {
			if !strings.Contains(text, edits[i]) {
				t.Fatalf("%s has no %q", kustomization, edits[i])
			}
			text = strings.Replace(text, edits[i], edits[i+1], 1)
		}
		if err := os.WriteFile(kustomization, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		gitserver.Git(t, work, "commit", "-qam", msg)
		gitserver.Push(t, work)
		refreshDev(t, hubClient)
	}
	commitDev("dev: more cache pods than nodes, one per node", "  count: 1\n", "  count: 4\n", "- path: memcached-small.yaml\n",
		"- path: memcached-small.yaml\n- patch: '[{\"op\": \"add\", \"path\": \"/spec/highAvailability\", \"value\": {\"antiAffinity\": \"Hard\"}}]'\n  target: {kind: Memcached, name: app-cache}\n")
	waitApplication(t, hubClient, "memcached-dev", "Degraded", nil)
	// What a user sees: the resource's health and the operator's reason.
	cluster.Eventually(t, time.Minute, "the CLI to show app-cache Degraded with the operator's reason", func() error {
		out, err := argo.TryCLI("app", "resources", "memcached-dev", "--output=tree=detailed")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[1] == "Memcached" && f[3] == "app-cache" && strings.Contains(line, "Degraded") && strings.Contains(line, "PodsUnschedulable") {
				return nil
			}
		}
		return fmt.Errorf("argocd app resources: %w\n%s", err, out)
	})
	commitDev("dev: back to one pod")
	waitApplication(t, hubClient, "memcached-dev", "Healthy", nil)
	commitDev("dev: pause the cache", "- path: memcached-small.yaml\n",
		"- path: memcached-small.yaml\n- patch: '[{\"op\": \"add\", \"path\": \"/spec/paused\", \"value\": true}]'\n  target: {kind: Memcached, name: app-cache}\n")
	waitApplication(t, hubClient, "memcached-dev", "Suspended", nil)
	commitDev("dev: resume the cache")
	waitApplication(t, hubClient, "memcached-dev", "Healthy", nil)

	// Promotion: a release tag with new pins; staging and prod move to it
	// by a change of their revision in the ApplicationSet, applied as in
	// the docs. staging syncs by itself, prod when asked.
	const promoted = "memcached:1.6.39-alpine@sha256:2b1ad2d6e2b4e7c3d4f0a6e9c2f1b5a8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2"
	for _, env := range []string{"staging", "prod"} {
		if out, code := pin(t, work, env, promoted); code != 0 {
			t.Fatalf("pins pin %s: %s", env, out)
		}
	}
	gitserver.Git(t, work, "commit", "-qam", "release v0.2.0: memcached by digest")
	gitserver.Git(t, work, "tag", "v0.2.0")
	editFile(t, filepath.Join(work, "deploy", "argocd", "applicationset.yaml"), "{env: staging, revision: v0.1.0", "{env: staging, revision: v0.2.0")
	editFile(t, filepath.Join(work, "deploy", "argocd", "applicationset.yaml"), "{env: prod, revision: v0.1.0", "{env: prod, revision: v0.2.0")
	gitserver.Git(t, work, "commit", "-qam", "promote v0.2.0 to staging and prod")
	gitserver.Push(t, work)
	promotedAt := time.Now()
	argo.Apply(t, filepath.Join(work, "deploy", "argocd"))
	waitImage := func(env string) {
		t.Helper()
		c := clusters[env].Client(t)
		cluster.Eventually(t, 3*time.Minute, env+": the promoted digest on the cache's pods", func() error {
			d := &appsv1.Deployment{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cache", Name: "app-cache"}, d); err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != promoted {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
		waitApplication(t, hubClient, "memcached-"+env, "Healthy", nil)
		t.Logf("%s: v0.2.0's digest arrived %v after the promotion", env, time.Since(promotedAt).Round(100*time.Millisecond))
	}
	waitImage("staging")
	waitApplicationSync(t, hubClient, "memcached-prod", "OutOfSync")
	argo.CLI(t, "app", "sync", "memcached-prod", "--timeout=300")
	waitImage("prod")

	// Reinstalling Argo CD (its install.yaml, applied server-side as the
	// install docs say) keeps the health check and impersonation: they
	// belong to the field manager memcached-argocd, not to kubectl's.
	cm := argocd.InstallManifest(t, "ConfigMap", "argocd-cm")
	cluster.Run(t, hub.Kubeconfig, cm, bins["kubectl"], "apply", "--server-side", "-n", argocd.Namespace, "-f", "-")
	if out := cluster.Run(t, hub.Kubeconfig, nil, bins["kubectl"], "get", "cm", "-n", argocd.Namespace, "argocd-cm", "-o", "jsonpath={.data}"); !strings.Contains(out, "resource.customizations.health.cache.example.com_Memcached") || !strings.Contains(out, "application.sync.impersonation.enabled") {
		t.Errorf("reinstalling Argo CD dropped the Memcached health check or impersonation: argocd-cm data %s", out)
	}

	// What the ported rules refuse, real Argo CD refuses for the same
	// reason: a project that lost a kind its Application syncs.
	trimmed := projectWithout(t, hubClient, "apps", "Deployment")
	refusedByRules := trimmed.PermitResource("memcached", "apps", "Deployment", "app-cache", "cache", argocd.Destination{Name: "dev"})
	if refusedByRules == nil {
		t.Fatal("the ported rules permit a Deployment the project no longer lists")
	}
	cluster.Run(t, hub.Kubeconfig, nil, bins["kubectl"], "patch", "appproject", "-n", argocd.Namespace, "memcached", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/namespaceResourceWhitelist", "value": `+mustJSON(t, trimmed.NamespaceResourceWhitelist)+`}]`)
	out, err := argo.TryCLI("app", "sync", "memcached-staging", "--force", "--timeout=120")
	if err == nil || !strings.Contains(out, refusedByRules.Error()) {
		t.Errorf("Argo CD synced despite the project (%v), or for another reason than the rules' %q:\n%s", err, refusedByRules, out)
	}
	// And the committed wiring, applied again (taking back the field the
	// hand edit took), lets it sync.
	argo.Apply(t, filepath.Join(work, "deploy", "argocd"), "--force-conflicts")
	cluster.Eventually(t, 2*time.Minute, "staging to sync again under the restored project", func() error {
		if out, err := argo.TryCLI("app", "sync", "memcached-staging", "--timeout=60"); err != nil {
			return fmt.Errorf("%w: %s", err, tail(out, 5))
		}
		return nil
	})
	waitApplication(t, hubClient, "memcached-staging", "Healthy", nil)

	// Reviewing a change before it merges: `make diff` renders what it
	// changes per object, and Argo CD compares it with the running dev
	// cluster (`argocd app diff --local`, exit 1: a difference).
	editFile(t, kustomization, "  count: 1\n", "  count: 2\n")
	stdout, stderr, code = run.Command(t, nil, filepath.Join(work, "bin", "pins"), "-C", work, "diff", "dev")
	if code != 0 || !strings.Contains(stdout, "~ cache.example.com/Memcached cache/app-cache") || !strings.Contains(stdout, "+  size: 2") {
		t.Errorf("make diff of a scaled instance: exit %d\n%s%s", code, stdout, stderr)
	}
	out, err = argo.TryCLI("app", "diff", "memcached-dev", "--local", work, "--server-side-generate")
	if err == nil || !strings.Contains(out, "size: 2") {
		t.Errorf("argocd app diff --local of a scaled instance (%v):\n%s", err, out)
	}

	// Removing an environment, as docs/deploy/argocd.md says: dev's
	// element leaves the ApplicationSet, applied as in step 3. Argo CD
	// deletes the caches (wave 1) before the operator (wave 0); the other
	// way round their finalizer would hold the Application forever.
	removed := time.Now()
	editFile(t, filepath.Join(work, "deploy", "argocd", "applicationset.yaml"), "      - {env: dev, revision: main, automated: true}\n", "")
	argo.Apply(t, filepath.Join(work, "deploy", "argocd"))
	cluster.Eventually(t, 3*time.Minute, "memcached-dev and what it synced to be deleted", func() error {
		if st := applicationStatus(t, hubClient, "memcached-dev"); st.message != "no such Application" {
			return fmt.Errorf("memcached-dev: %s", st)
		}
		if err := dev.Get(context.Background(), types.NamespacedName{Namespace: names.OperatorNamespace, Name: names.ManagerDeployment}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the manager Deployment: %w", err)
		}
		return nil
	})
	t.Logf("dev: removed from the ApplicationSet to deleted: %v", time.Since(removed).Round(100*time.Millisecond))
	deleteWhatGitOpsLeaves(t, dev, clusters["dev"].Kubeconfig)
}

// checkWaveOrder reads when Argo CD's server-side apply (field manager
// argocd-controller) last wrote the CRD, the operator's Deployment and the
// cache, as the apiserver recorded it in their managedFields: each wave
// ends at least ARGOCD_SYNC_WAVE_DELAY (2 s) before the next starts, so
// with waves -1, 0 and 1 the times are strictly ordered at the
// managedFields' one-second resolution. Gitops-engine finishes a first sync
// even with the waves wrong, so its result alone would not show it.
func checkWaveOrder(t *testing.T, c client.Client, env string) {
	t.Helper()
	objects := []struct {
		what string
		obj  client.Object
		key  types.NamespacedName
	}{
		{"the CRD (wave -1)", &apiextensionsv1.CustomResourceDefinition{}, types.NamespacedName{Name: "memcacheds.cache.example.com"}},
		{"the operator's Deployment (wave 0)", &appsv1.Deployment{}, types.NamespacedName{Namespace: names.OperatorNamespace, Name: "memcached-operator-controller-manager"}},
		{"the cache app-cache (wave 1)", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached"}}, types.NamespacedName{Namespace: "cache", Name: "app-cache"}},
	}
	var last time.Time
	for i, o := range objects {
		if err := c.Get(context.Background(), o.key, o.obj); err != nil {
			t.Fatalf("%s: %s: %v", env, o.what, err)
		}
		var applied time.Time
		for _, f := range o.obj.GetManagedFields() {
			if f.Manager == "argocd-controller" && f.Operation == "Apply" && f.Subresource == "" && f.Time != nil {
				applied = f.Time.Time
			}
		}
		if applied.IsZero() {
			t.Errorf("%s: %s has no apply by argocd-controller", env, o.what)
			return
		}
		if i > 0 && !applied.After(last) {
			t.Errorf("%s: %s was applied at %s, not after %s (%s): the sync waves are out of order", env, o.what, applied.Format(time.RFC3339), objects[i-1].what, last.Format(time.RFC3339))
		}
		last = applied
	}
}

// createClusters starts kwok clusters named prefix+name with the given
// numbers of nodes, in parallel, and deletes them when the test ends.
func createClusters(t *testing.T, prefix string, nodes map[string]int) map[string]*cluster.Local {
	t.Helper()
	clusters := map[string]*cluster.Local{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, n := range nodes {
		wg.Go(func() {
			k, err := cluster.CreateLocal(prefix+name, n, t.TempDir())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			clusters[name] = k
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, k := range clusters {
		t.Cleanup(func() {
			if err := k.Delete(); err != nil {
				t.Error(err)
			}
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	return clusters
}

// projectWithout is the live memcached AppProject with one namespaced kind
// taken out of its whitelist.
func projectWithout(t *testing.T, c client.Client, group, kind string) argocd.Project {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("argoproj.io/v1alpha1")
	obj.SetKind("AppProject")
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: argocd.Namespace, Name: "memcached"}, obj); err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	var p argocd.Project
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &p); err != nil {
		t.Fatal(err)
	}
	p.NamespaceResourceWhitelist = slices.DeleteFunc(p.NamespaceResourceWhitelist, func(gk argocd.GroupKind) bool { return gk.Group == group && gk.Kind == kind })
	return p
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitApplicationSync waits for an Application's sync status alone.
func waitApplicationSync(t *testing.T, c client.Client, name, sync string) {
	t.Helper()
	cluster.Eventually(t, 2*time.Minute, name+" "+sync, func() error {
		if s := applicationStatus(t, c, name); s.sync != sync {
			return fmt.Errorf("%s", s)
		}
		return nil
	})
}

var envNames = []string{"dev", "staging", "prod"}

// appStatus is what the tests read of an Application's status.
type appStatus struct {
	sync, health, phase, message string
	retries                      int64
}

func (s appStatus) String() string {
	return fmt.Sprintf("sync %s, health %s, operation %s (%s)", s.sync, s.health, s.phase, s.message)
}

func applicationStatus(t *testing.T, c client.Client, name string) appStatus {
	t.Helper()
	app := &unstructured.Unstructured{}
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: argocd.Namespace, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return appStatus{message: "no such Application"}
		}
		t.Fatal(err)
	}
	var s appStatus
	s.sync, _, _ = unstructured.NestedString(app.Object, "status", "sync", "status")
	s.health, _, _ = unstructured.NestedString(app.Object, "status", "health", "status")
	s.phase, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "phase")
	s.message, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "message")
	s.retries, _, _ = unstructured.NestedInt64(app.Object, "status", "operationState", "retryCount")
	if conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions"); len(conds) > 0 {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			s.message += fmt.Sprintf("; %v: %v", m["type"], m["message"])
		}
	}
	return s
}

// waitApplication waits for an Application to be Synced with the given
// health, calling each (when set) on every poll.
func waitApplication(t *testing.T, c client.Client, name, health string, each func()) {
	t.Helper()
	cluster.Eventually(t, 4*time.Minute, name+" Synced and "+health, func() error {
		if each != nil {
			each()
		}
		if s := applicationStatus(t, c, name); s.sync != "Synced" || s.health != health {
			return fmt.Errorf("%s", s)
		}
		return nil
	})
}

// refreshDev is what a Git webhook does for main's commits: dev, the one
// Application that follows the branch, compares against its new head at
// once.
func refreshDev(t *testing.T, c client.Client) {
	t.Helper()
	app := &unstructured.Unstructured{}
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	app.SetNamespace(argocd.Namespace)
	app.SetName("memcached-dev")
	if err := c.Patch(context.Background(), app, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`))); err != nil {
		t.Fatal(err)
	}
}

// resourceSyncFailure is the message of an Application's last sync result
// for one object, if that object failed to sync.
func resourceSyncFailure(t *testing.T, c client.Client, app, kind, name string) string {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("argoproj.io/v1alpha1")
	obj.SetKind("Application")
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: argocd.Namespace, Name: app}, obj); err != nil {
		t.Fatal(err)
	}
	results, _, _ := unstructured.NestedSlice(obj.Object, "status", "operationState", "syncResult", "resources")
	for _, r := range results {
		m, _ := r.(map[string]any)
		if m["kind"] == kind && m["name"] == name && m["status"] == "SyncFailed" {
			return fmt.Sprint(m["message"])
		}
	}
	return ""
}
