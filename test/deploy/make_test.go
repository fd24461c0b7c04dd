package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// make install, deploy, render, undeploy and uninstall do what a kubebuilder
// user expects, against the cluster of $KUBECONFIG (ENV=dev by default).
func TestMakeTargets(t *testing.T) {
	if _, err := repo.Bin("kubectl", "kustomize", "manager"); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartEnvtest(t)
	ctx := context.Background()
	makeTarget := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root(t)}, args...)...)
		cmd.Env = append(run.UserEnv(), "KUBECONFIG="+c.Kubeconfig)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out) // stdout only: make render's output is the manifests
	}
	exists := func(obj *unstructured.Unstructured, namespace, name string) bool {
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	memcached := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("cache.example.com/v1alpha1")
		u.SetKind("Memcached")
		return u
	}

	makeTarget("install")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	get(t, c, "", "memcacheds.cache.example.com", crd)
	get(t, c, names.OperatorNamespace, names.ManagerServiceAccount, &corev1.ServiceAccount{})

	makeTarget("deploy")
	get(t, c, names.OperatorNamespace, names.ManagerServiceAccount, &appsv1.Deployment{})
	if !exists(memcached(), names.CacheNamespace, "app-cache") {
		t.Fatal("make deploy did not create the dev Memcached")
	}

	// The seed's `export IMG=...; make docker-build docker-push; make deploy`:
	// the manager runs IMG, and the overlay's files stay as they are.
	overlayBefore := run.ReadFile(t, filepath.Join(root(t), "overlays", "dev", "operator", "kustomization.yaml"))
	const img = "localhost:5000/memcached-operator:v0.0.1"
	makeTarget("deploy", "IMG="+img)
	d := &appsv1.Deployment{}
	get(t, c, names.OperatorNamespace, names.ManagerServiceAccount, d)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != img {
		t.Errorf("make deploy IMG=%s runs %s", img, got)
	}
	if got := makeTarget("render", "ENV=prod", "IMG="+img); !strings.Contains(got, "image: "+img+"\n") {
		t.Errorf("make render ENV=prod IMG=%s does not run IMG (prod's digest must go too)", img)
	}
	if run.ReadFile(t, filepath.Join(root(t), "overlays", "dev", "operator", "kustomization.yaml")) != overlayBefore {
		t.Errorf("make deploy IMG=... changed the overlay")
	}

	if got := makeTarget("render"); got != string(buildCLI(t, "overlays/dev")) {
		t.Errorf("make render is not the dev overlay")
	}
	if got := makeTarget("render", "ENV=prod"); !strings.Contains(got, prodImage) {
		t.Errorf("make render ENV=prod does not render prod")
	}

	// The operator must run for undeploy: Memcacheds go first, through its finalizer.
	cluster.StartManager(t, c.Kubeconfig, "--metrics-bind-address=0")
	cluster.Eventually(t, 30*time.Second, "the finalizer on app-cache", func() error {
		mc := memcached()
		if !exists(mc, names.CacheNamespace, "app-cache") || len(mc.GetFinalizers()) == 0 {
			return os.ErrNotExist
		}
		return nil
	})
	makeTarget("undeploy")
	if exists(memcached(), names.CacheNamespace, "app-cache") {
		t.Errorf("make undeploy left the Memcached")
	}
	cluster.Eventually(t, 30*time.Second, "the manager Deployment to be deleted", func() error {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: names.OperatorNamespace, Name: names.ManagerServiceAccount}, d); !apierrors.IsNotFound(err) {
			return os.ErrExist
		}
		return nil
	})

	makeTarget("uninstall")
	cluster.Eventually(t, 30*time.Second, "the CRD to be deleted", func() error {
		if err := c.Client.Get(ctx, types.NamespacedName{Name: "memcacheds.cache.example.com"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
			return os.ErrExist
		}
		return nil
	})
}

// make help lists, one line each with what it does, every target a user of
// the repository is told about: kubebuilder's set and this repository's own.
func TestMakeHelp(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run.Command(t, nil, "make", "-s", "-C", root, "help")
	if code != 0 {
		t.Fatalf("make help: exit %d\n%s", code, stderr)
	}
	plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(stdout, "")
	described := map[string]string{}
	for _, line := range strings.Split(plain, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(line, "  ") {
			described[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for _, target := range []string{
		"help", "tools", "fmt", "vet", "lint", "build", "test", "generate", "manifests", "run", "e2e",
		"install", "uninstall", "deploy", "undeploy", "render", "bench",
		"cluster-up", "cluster-down", "pin", "promote", "kpt-render",
		"docker-build", "docker-push", "registry-up", "registry-down", "release", "retarget", "keygen", "verify-release",
	} {
		if described[target] == "" {
			t.Errorf("make help does not describe %q:\n%s", target, plain)
		}
	}
	// Whatever the Makefile documents with "##" is what help prints.
	documented := regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):[^=\n]*##`).FindAllStringSubmatch(run.ReadFile(t, filepath.Join(root, "Makefile")), -1)
	if len(documented) != len(described) {
		t.Errorf("the Makefile documents %d targets, make help shows %d", len(documented), len(described))
	}
}
