package ship

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/flux"
	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// checkFluxVerifiesTheChart runs the real source-controller against the
// release's registry with deploy/flux/helm's OCIRepository as committed,
// its verify block and the Secret it names holding the release's public
// key. Only the URL, the tag and insecure (the registry speaks plain HTTP
// on the cluster's private address) change. The chart make helm-push
// signed is verified and becomes an artifact the HelmRelease can
// install; the same chart pushed unsigned, and pushed by make helm-push
// signing with another key, are refused with VerificationError and no
// artifact.
func checkFluxVerifiesTheChart(t *testing.T, k *cluster.Local, work, host, signedVersion string) {
	t.Helper()
	bins, err := repo.Bin("kubectl", "kustomize", "helm")
	if err != nil {
		t.Fatal(err)
	}
	ctrl := flux.Start(t, k.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("source-controller:\n%s", lastLines(ctrl.Source.Output(), 30))
		}
	})

	unsignedVersion, foreignVersion := "0.2.1", "0.2.2"
	pushUnsignedChart(t, bins["helm"], work, host, unsignedVersion)
	otherKey, _ := registry.SigningKey(t)
	makeIn(t, work, "helm-push", "VERSION=v"+foreignVersion, "REGISTRY="+host, "COSIGN_KEY="+otherKey)

	// As deploy/flux/helm/release.yaml tells a user to.
	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "-n", "flux-system", "create", "secret", "generic", "memcached-operator-cosign",
		"--from-file=cosign.pub="+filepath.Join(work, ".work", "cosign.pub"))

	stdout, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(work, "deploy", "flux", "helm"))
	if code != 0 {
		t.Fatalf("kustomize build deploy/flux/helm: %s", stderr)
	}
	committed := ociRepository(t, stdout)
	if provider, _, _ := unstructured.NestedString(committed.Object, "spec", "verify", "provider"); provider != "cosign" {
		t.Fatalf("deploy/flux/helm's OCIRepository verifies with %q, want cosign", provider)
	}
	c := k.Client(t)
	cases := []struct {
		version, what string
		verified      bool
	}{
		{signedVersion, "signed with the release key by make helm-push", true},
		{unsignedVersion, "unsigned", false},
		{foreignVersion, "signed with another key", false},
	}
	for _, tc := range cases {
		o := committed.DeepCopy()
		o.SetName(committed.GetName() + "-" + strings.ReplaceAll(tc.version, ".", "-"))
		_ = unstructured.SetNestedField(o.Object, "oci://"+host+"/charts/memcached-operator", "spec", "url")
		_ = unstructured.SetNestedField(o.Object, tc.version, "spec", "ref", "tag")
		_ = unstructured.SetNestedField(o.Object, true, "spec", "insecure")
		_ = unstructured.SetNestedField(o.Object, "5s", "spec", "interval")
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		key := types.NamespacedName{Namespace: committed.GetNamespace(), Name: committed.GetName() + "-" + strings.ReplaceAll(tc.version, ".", "-")}
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(committed.GroupVersionKind())
		cluster.Eventually(t, 2*time.Minute, fmt.Sprintf("source-controller to judge the chart %s (%s)", tc.version, tc.what), func() error {
			if err := c.Get(context.Background(), key, o); err != nil {
				return err
			}
			return judged(o, tc.verified)
		})
		t.Logf("source-controller: chart %s, %s: %s", tc.version, tc.what, conditionMessage(o, "SourceVerified"))
	}
}

// judged is nil once source-controller has verified o and stored its
// artifact (verified), or refused it for its signature and stored none.
// A refusal leaves status.observedGeneration where it was (Flux records
// it only for a reconcile that succeeds), so each condition is held to
// its own observedGeneration.
func judged(o *unstructured.Unstructured, verified bool) error {
	want := map[bool]string{true: "True", false: "False"}[verified]
	for _, c := range []struct{ typ, status, reason string }{
		{"SourceVerified", want, map[bool]string{true: "Succeeded", false: "VerificationError"}[verified]},
		{"Ready", want, ""},
	} {
		if err := fluxCondition(o, c.typ, c.status, c.reason); err != nil {
			return err
		}
	}
	if _, stored, _ := unstructured.NestedMap(o.Object, "status", "artifact"); stored != verified {
		return fmt.Errorf("artifact stored: %v, want %v", stored, verified)
	}
	return nil
}

// fluxCondition is nil when o's condition typ has status (and reason, if
// given) for o's generation.
func fluxCondition(o *unstructured.Unstructured, typ, status, reason string) error {
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, raw := range conditions {
		c, _ := raw.(map[string]any)
		if c["type"] != typ {
			continue
		}
		if gen, _ := c["observedGeneration"].(int64); gen != o.GetGeneration() {
			return fmt.Errorf("%s is for generation %d of %d", typ, gen, o.GetGeneration())
		}
		if c["status"] != status || (reason != "" && c["reason"] != reason) {
			return fmt.Errorf("%s=%v %v: %v", typ, c["status"], c["reason"], c["message"])
		}
		return nil
	}
	return fmt.Errorf("no %s condition", typ)
}

// pushUnsignedChart packages the chart as version and pushes it with helm
// alone, as a release that skipped signing would.
func pushUnsignedChart(t *testing.T, helm, work, host, version string) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"package", filepath.Join(work, "deploy", "helm", "memcached-operator"), "--destination", dir, "--version", version},
		{"push", filepath.Join(dir, "memcached-operator-"+version+".tgz"), "oci://" + host + "/charts", "--plain-http"},
	} {
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", args[0], err, out)
		}
	}
}

// ociRepository is the one OCIRepository in the rendered YAML stream.
func ociRepository(t *testing.T, stream string) *unstructured.Unstructured {
	t.Helper()
	for _, doc := range strings.Split(stream, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == "OCIRepository" {
			return o
		}
	}
	t.Fatalf("no OCIRepository in:\n%s", stream)
	return nil
}

func conditionMessage(o *unstructured.Unstructured, typ string) string {
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, raw := range conditions {
		if c, _ := raw.(map[string]any); c["type"] == typ {
			return fmt.Sprintf("%s=%v %v: %v", typ, c["status"], c["reason"], c["message"])
		}
	}
	return "no " + typ + " condition"
}
