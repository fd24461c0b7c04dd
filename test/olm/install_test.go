package olm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/operator-framework/api/crds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
)

// What `make olm-publish` prints for a user to apply (dist/olm-install.yaml:
// the CatalogSource, the install namespace, its OperatorGroup and the
// Subscription) is accepted as written by OLM's own CRDs
// (operator-framework/api's, at the version the bundle is validated
// with), with strict field validation, so no field is misspelt or
// dropped.
func TestInstallObjectsAreAcceptedByOLMsCRDs(t *testing.T) {
	env := cluster.StartEnvtest(t)
	ctx := context.Background()
	for _, crd := range []client.Object{crds.CatalogSource(), crds.OperatorGroup(), crds.Subscription()} {
		if err := env.Client.Create(ctx, crd); err != nil {
			t.Fatalf("create OLM's CRD %s: %v", crd.GetName(), err)
		}
		cluster.Run(t, env.Kubeconfig, nil, bin(t, "kubectl"), "wait", "--for=condition=Established", "crd/"+crd.GetName(), "--timeout=60s")
	}
	// OLM's own install makes the global catalog namespace.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "olm"}}); err != nil {
		t.Fatal(err)
	}

	const image = "registry.example.com/memcached-operator-catalog:v0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	out := filepath.Join(t.TempDir(), "olm-install.yaml")
	generate := exec.Command("go", "run", "./hack/cmd/generate", "olm-install")
	generate.Dir = repo.MustRoot(t)
	generate.Env = append(os.Environ(), "CATALOG_IMAGE="+image, "OLM_INSTALL_OUT="+out)
	if b, err := generate.CombinedOutput(); err != nil {
		t.Fatalf("generate olm-install: %v\n%s", err, b)
	}
	cluster.Run(t, env.Kubeconfig, nil, bin(t, "kubectl"), "apply", "--server-side", "--validate=strict", "-f", out)

	sub := &unstructured.Unstructured{}
	sub.SetAPIVersion("operators.coreos.com/v1alpha1")
	sub.SetKind("Subscription")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "memcached-operator-system", Name: "memcached-operator"}, sub); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"name": "memcached-operator", "channel": "stable", "source": "memcached-operator", "sourceNamespace": "olm", "installPlanApproval": "Automatic"} {
		if got, _, _ := unstructured.NestedString(sub.Object, "spec", field); got != want {
			t.Errorf("the stored Subscription's spec.%s is %q, want %q", field, got, want)
		}
	}
	source := &unstructured.Unstructured{}
	source.SetAPIVersion("operators.coreos.com/v1alpha1")
	source.SetKind("CatalogSource")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "olm", Name: "memcached-operator"}, source); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(source.Object, "spec", "image"); got != image {
		t.Errorf("the stored CatalogSource serves %q, want %q", got, image)
	}
}
