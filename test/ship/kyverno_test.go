package ship

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// checkKyvernoVerifiesTheImages renders deploy/kyverno with the release's
// public key, applies the policy to the cluster of k with Kyverno's own
// CRDs (the schema Kyverno's API server side would hold it to), and runs
// it through Kyverno's image-verification engine (the Kyverno CLI's apply)
// against the release's registry: a Pod running the released manager
// digest passes; the same Pod on the unsigned image, and on the image
// signed by another key, fails; a Pod of an image the release does not
// sign (memcached) is not the policy's to judge and passes.
func checkKyvernoVerifiesTheImages(t *testing.T, k *cluster.Local, work, signed, unsigned, foreign, upstream string) {
	t.Helper()
	bins, err := repo.Bin("kubectl", "kustomize", "kyverno", "kyverno-crds")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "kyverno")
	if out, err := exec.Command("cp", "-r", filepath.Join(work, "deploy", "kyverno"), policyDir).CombinedOutput(); err != nil {
		t.Fatalf("copy deploy/kyverno: %v\n%s", err, out)
	}
	// Without the key, the build fails and names the file to add.
	if _, stderr, code := run.Command(t, nil, bins["kustomize"], "build", policyDir); code == 0 || !strings.Contains(stderr, "release-cosign.pub") {
		t.Errorf("deploy/kyverno built without release-cosign.pub (exit %d): %s", code, stderr)
	}
	public := run.ReadFile(t, filepath.Join(work, ".work", "cosign.pub"))
	if err := os.WriteFile(filepath.Join(policyDir, "release-cosign.pub"), []byte(public), 0o644); err != nil {
		t.Fatal(err)
	}
	policy, stderr, code := run.Command(t, nil, bins["kustomize"], "build", policyDir)
	if code != 0 {
		t.Fatalf("kustomize build deploy/kyverno: %s", stderr)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}

	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", bins["kyverno-crds"])
	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=60s", "crd/imagevalidatingpolicies.policies.kyverno.io")
	cluster.Run(t, k.Kubeconfig, []byte(policy), bins["kubectl"], "apply", "--server-side", "-f", "-")

	for _, tc := range []struct {
		image, what string
		admitted    bool
	}{
		{signed, "the released manager, signed with its provenance", true},
		{unsigned, "unsigned", false},
		{foreign, "signed with another key", false},
		{upstream, "not one of the release's images", true},
	} {
		pod := filepath.Join(dir, "pod.yaml")
		manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: manager\n  namespace: memcached-operator-system\nspec:\n  containers:\n  - name: manager\n    image: %s\n", tc.image)
		if err := os.WriteFile(pod, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bins["kyverno"], "apply", policyFile, "--resource", pod, "--registry", "--remove-color").CombinedOutput()
		summary := kyvernoSummary(string(out))
		switch {
		case tc.admitted && (err != nil || summary != "pass: 1, fail: 0, warn: 0, error: 0, skip: 0"):
			t.Errorf("Kyverno refused a Pod running %s (%s) (%v):\n%s", tc.image, tc.what, err, out)
		case !tc.admitted && (err == nil || !strings.HasPrefix(summary, "pass: 0, fail: 1,")):
			t.Errorf("Kyverno admitted a Pod running %s (%s) (%v):\n%s", tc.image, tc.what, err, out)
		default:
			t.Logf("Kyverno: %s (%s): %s", tc.image, tc.what, summary)
		}
	}
}

// kyvernoSummary is the CLI's result line, such as "pass: 1, fail: 0, ...".
func kyvernoSummary(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pass: ") {
			return strings.TrimSpace(line)
		}
	}
	return "no result line"
}
