package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/kpt"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// scratchRepo copies overlays/ into a temporary repository whose bin/ is
// the real one, so bin/pins can edit overlays freely.
func scratchRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := kpt.CopyPackage(filepath.Join(root(t), "overlays"), filepath.Join(dir, "overlays")); err != nil {
		t.Fatal(err)
	}
	bin, err := repo.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Bin("set-image-replicas", "kpt", "pins"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// pins runs bin/pins on the scratch repository dir, as make pin, make
// promote and make kpt-render do on the checkout.
func pins(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	t.Setenv("PATH", os.Getenv("PATH"))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	stdout, stderr, code := run.Command(t, nil, filepath.Join(dir, "bin", "pins"), append([]string{"-C", dir}, args...)...)
	return stdout + stderr, code
}

// The GitOps promotion step copies image pins, never replica counts, and
// keeps digest pinning where the target has it.
func TestPromote(t *testing.T) {
	dir := scratchRepo(t)
	staging := filepath.Join(dir, "overlays", "staging")
	prod := filepath.Join(dir, "overlays", "prod")
	replicasBefore := run.ReadFile(t, filepath.Join(staging, "replicas.yaml"))

	out, code := pins(t, dir, nil, "promote", "dev", "staging")
	if code != 0 {
		t.Fatalf("promote dev staging: exit %d\n%s", code, out)
	}
	for _, file := range []string{"images.yaml", "operator/kustomization.yaml"} {
		if got := run.ReadFile(t, filepath.Join(staging, file)); !strings.Contains(got, "newTag: main-3b9e154") {
			t.Errorf("staging %s did not receive dev's tag:\n%s", file, got)
		}
	}
	if got := run.ReadFile(t, filepath.Join(staging, "replicas.yaml")); got != replicasBefore {
		t.Errorf("promotion changed staging's replica pins:\n%s", got)
	}
	if kust := run.ReadFile(t, filepath.Join(staging, "operator", "kustomization.yaml")); !strings.Contains(kust, "- name: memcached-operator-controller-manager\n  count: 2") {
		t.Errorf("staging lost its replica count:\n%s", kust)
	}

	// What was promoted still renders and is in sync with its pins.
	if out, code := pins(t, dir, nil, "render", "staging"); code != 0 || strings.Contains(out, "pinned") {
		t.Errorf("render after promotion is not a no-op: exit %d\n%s", code, out)
	}

	// prod pins by digest, resolved from the registry: a digest typed in
	// is not taken, and a registry that does not answer for a tag refuses
	// the promotion; either way prod is unchanged. (The successful path,
	// against a real registry, is test/ship's TestReleaseThroughARealRegistry.)
	prodImages := run.ReadFile(t, filepath.Join(prod, "images.yaml"))
	out, code = pins(t, dir, []string{"DIGEST=sha256:" + strings.Repeat("ab", 32)}, "promote", "staging", "prod")
	if code == 0 || !strings.Contains(out, "DIGEST is not taken") {
		t.Errorf("promote took a digest from DIGEST: exit %d\n%s", code, out)
	}
	unreachable := fmt.Sprintf("127.0.0.1:%d/memcached-operator", closedPort(t))
	stagingImages := filepath.Join(staging, "images.yaml")
	retargeted := strings.Replace(run.ReadFile(t, stagingImages), "- name: registry.example.com/memcached-operator\n",
		"- name: registry.example.com/memcached-operator\n  newName: "+unreachable+"\n", 1)
	if err := os.WriteFile(stagingImages, []byte(retargeted), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = pins(t, dir, []string{"DIGEST="}, "promote", "staging", "prod")
	if code == 0 || !strings.Contains(out, unreachable+":main-3b9e154") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("promote into prod without a registry's digest: exit %d\n%s", code, out)
	}
	if got := run.ReadFile(t, filepath.Join(prod, "images.yaml")); got != prodImages {
		t.Errorf("a refused promotion changed prod:\n%s", got)
	}
}

// `make pin` updates the pins the overlay already has and fails, changing
// nothing, on a typo.
func TestPin(t *testing.T) {
	dir := scratchRepo(t)
	prod := filepath.Join(dir, "overlays", "prod")

	digest := "sha256:" + strings.Repeat("cd", 32)
	out, code := pins(t, dir, nil, "pin", "-replicas", "Memcached/app-cache=5", "prod",
		"registry.example.com/memcached-operator:v0.3.0@"+digest, "memcached:1.6.40-alpine")
	if code != 0 {
		t.Fatalf("pin: exit %d\n%s", code, out)
	}
	kust := run.ReadFile(t, filepath.Join(prod, "operator", "kustomization.yaml")) + run.ReadFile(t, filepath.Join(prod, "instances", "kustomization.yaml"))
	for _, want := range []string{
		"newTag: v0.3.0\n  digest: " + digest,
		"- name: memcached\n  newTag: 1.6.40-alpine",
		"- name: app-cache\n  count: 5",
		"- name: memcached-operator-controller-manager\n  count: 2",
	} {
		if !strings.Contains(kust, want) {
			t.Errorf("the overlay's kustomizations lack %q:\n%s", want, kust)
		}
	}
	if images := run.ReadFile(t, filepath.Join(prod, "images.yaml")); !strings.Contains(images, "newTag: \"v0.3.0\"") && !strings.Contains(images, "newTag: v0.3.0") {
		t.Errorf("images.yaml was not updated:\n%s", images)
	}

	before := run.ReadFile(t, filepath.Join(prod, "operator", "kustomization.yaml"))
	out, code = pins(t, dir, nil, "pin", "prod", "registry.example.com/memcached-operatr:v9")
	if code == 0 || !strings.Contains(out, "matched no image") {
		t.Errorf("a misspelled image must fail: exit %d\n%s", code, out)
	}
	if run.ReadFile(t, filepath.Join(prod, "operator", "kustomization.yaml")) != before {
		t.Errorf("a failed pin changed the overlay")
	}
	out, code = pins(t, dir, nil, "pin", "-replicas", "Memcached/app-cache=-1", "prod")
	if code == 0 || !strings.Contains(out, "want Kind/name=count") {
		t.Errorf("a negative count must fail: exit %d\n%s", code, out)
	}
}
