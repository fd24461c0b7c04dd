package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/test/internal/argocd"
	"github.com/example/memcached-operator/test/internal/gitserver"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// The Helm path of docs/deploy/argocd.md, step for step, with Argo CD
// itself and the CNCF registry: `make helm-push` publishes the chart, the
// registry's address goes in deploy/argocd/settings/settings.yaml, the
// repository Secret gets insecureOCIForceHttp for a plain-HTTP registry,
// and `kubectl apply -k deploy/argocd/helm` deploys it to dev, where Argo
// CD pulls, renders and syncs the chart until it is Synced and Healthy.
func TestArgoCDDeploysTheChartFromARegistry(t *testing.T) {
	t.Parallel() // fake nodes only: see the package comment
	reg := registry.Start(t)
	clusters := createClusters(t, "argocd-helm-", map[string]int{"hub": 0, "dev": 1})
	hub, dev := clusters["hub"], clusters["dev"]
	hub.DumpOnFailure(t)
	dev.DumpOnFailure(t)
	argo := argocd.Start(t, hub.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("argocd-repo-server:\n%s", tail(argo.Output("argocd-repo-server"), 40))
		}
	})
	argo.RegisterCluster(t, "dev", dev.Kubeconfig)

	// A working copy with this repository's bin/, which `make helm-push`
	// runs (scripts/helm-push.sh is all the target does).
	bins, err := repo.Bin("helm")
	if err != nil {
		t.Fatal(err)
	}
	work := gitserver.Snapshot(t, repo.MustRoot(t))
	if err := os.Symlink(filepath.Dir(bins["helm"]), filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	key, _ := registry.SigningKey(t)
	stdout, stderr, code := run.Command(t, nil, "env", "REGISTRY="+reg.Host, "COSIGN_KEY="+key, filepath.Join(work, "scripts", "helm-push.sh"))
	if code != 0 {
		t.Fatalf("make helm-push: exit %d\n%s%s", code, stdout, stderr)
	}
	charts := reg.Host + "/charts"
	editFile(t, filepath.Join(work, "deploy", "argocd", "settings", "settings.yaml"), "chartRepoURL: registry.example.com/charts", "chartRepoURL: "+charts)
	editFile(t, filepath.Join(work, "deploy", "argocd", "helm", "repository.yaml"), "  enableOCI: \"true\"\n", "  enableOCI: \"true\"\n  insecureOCIForceHttp: \"true\"\n")
	argo.Apply(t, filepath.Join(work, "deploy", "argocd", "helm"))

	hubClient := hub.Client(t)
	const app = "memcached-operator-helm-dev"
	waitApplication(t, hubClient, app, "Healthy", nil)
	t.Logf("dev: the chart from the registry Synced and Healthy %v after the push", time.Since(pushed).Round(100*time.Millisecond))
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("argoproj.io/v1alpha1")
	obj.SetKind("Application")
	if err := hubClient.Get(context.Background(), types.NamespacedName{Namespace: argocd.Namespace, Name: app}, obj); err != nil {
		t.Fatal(err)
	}
	repoURL, _, _ := unstructured.NestedString(obj.Object, "status", "sync", "comparedTo", "source", "repoURL")
	revision, _, _ := unstructured.NestedString(obj.Object, "status", "sync", "revision")
	if repoURL != charts || !strings.HasPrefix(stdout, "helm install memcached-operator oci://"+charts+"/memcached-operator --version "+revision+" ") {
		t.Errorf("Argo CD synced %s at %s; make helm-push published %s", repoURL, revision, stdout)
	}

	// What the chart installs is running in dev: the CRD and the
	// operator's Deployment under its release.
	c := dev.Client(t)
	if err := c.Get(context.Background(), types.NamespacedName{Name: "memcacheds.cache.example.com"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the chart's CRD: %v", err)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: names.OperatorNamespace, Name: "memcached-operator-controller-manager"}, d); err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}
	if got := d.Labels["app.kubernetes.io/instance"]; got != "memcached-operator" {
		t.Errorf("the Deployment's release label %q, want the Application's releaseName memcached-operator", got)
	}
	if d.Status.AvailableReplicas < 1 {
		t.Errorf("the operator Deployment has no available replica: %+v", d.Status)
	}
}
