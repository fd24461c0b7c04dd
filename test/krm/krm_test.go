// Package krm proves that the set-image-replicas binary works everywhere a
// KRM function runs: as a kustomize exec transformer, under kpt's own
// `fn render` (bin/kpt), standalone, and as the static non-root binary its
// container image ships.
package krm

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/example/memcached-operator/test/internal/kpt"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

func binaries(t *testing.T, names ...string) map[string]string {
	t.Helper()
	bins, err := repo.Bin(names...)
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			copyDir(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// 1. kustomize exec transformer: the config names the binary in
// config.kubernetes.io/function and sits under transformers:.
func TestKustomizeExecTransformer(t *testing.T) {
	bins := binaries(t, "kustomize", "set-image-replicas")
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "base"), filepath.Join(dir, "base"))
	overlay := filepath.Join(dir, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(overlay, "kustomization.yaml"), "resources:\n- ../base\ntransformers:\n- pins.yaml\n")
	pins := func(count string) string {
		return `apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: pins
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ` + bins["set-image-replicas"] + `
images:
- name: memcached
  newTag: 1.6.39-alpine
- name: registry.example.com/web
  digest: sha256:4444444444444444444444444444444444444444444444444444444444444444
replicas:
- name: web
  count: ` + count + `
- kind: Memcached
  count: 3
`
	}

	write(t, filepath.Join(overlay, "pins.yaml"), pins("4"))
	out, stderr, code := run.Command(t, nil, bins["kustomize"], "build", "--enable-alpha-plugins", "--enable-exec", overlay)
	if code != 0 {
		t.Fatalf("kustomize build exited %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		"image: memcached:1.6.39-alpine",
		"image: registry.example.com/web@sha256:4444444444444444444444444444444444444444444444444444444444444444",
		"replicas: 4",
		"size: 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kustomize output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1.6.38") {
		t.Errorf("an image was left unpinned:\n%s", out)
	}

	// A bad config fails the build with the function's message.
	write(t, filepath.Join(overlay, "pins.yaml"), pins("-4"))
	out, stderr, code = run.Command(t, nil, bins["kustomize"], "build", "--enable-alpha-plugins", "--enable-exec", overlay)
	if code == 0 {
		t.Fatalf("kustomize build accepted a negative count:\n%s", out)
	}
	if !strings.Contains(stderr, "replicas[0].count: -4 is negative") {
		t.Errorf("kustomize's error does not carry the function's message:\n%s", stderr)
	}
}

// 2. kpt: the real `kpt fn render` (bin/kpt, kpt's own render command from
// the newest kpt release the Go module proxy serves) runs the function
// named in the Kptfile (`exec: set-image-replicas`, looked up on PATH),
// sends it the package as a ResourceList with the mutator's configPath file
// as functionConfig, and writes the items back only when it exits 0.
func TestKptRender(t *testing.T) {
	bins := binaries(t, "set-image-replicas", "kpt")
	binDir := filepath.Dir(bins["set-image-replicas"])
	pkg := t.TempDir()
	copyDir(t, filepath.Join("testdata", "kpt-package"), pkg)
	config := filepath.Join(pkg, "pins.yaml")

	render := func() kpt.Rendered {
		t.Helper()
		r, err := kpt.Render(pkg, ".", binDir)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	got := render()
	if got.ExitCode != 0 || len(got.Steps) != 1 {
		t.Fatalf("exit code %d, %d steps:\n%s", got.ExitCode, len(got.Steps), got.Output)
	}
	if n := infos(got.Steps[0]); n != 3 {
		t.Errorf("want 3 info results (two images, one size), got %d:\n%s", n, got.Output)
	}
	rendered := run.ReadFile(t, filepath.Join(pkg, "memcached.yaml"))
	for _, want := range []string{
		"# The session cache of the web tier.",
		"name: sessions # referenced by the web Deployment",
		"size: 3",
		"image: memcached:1.6.39-alpine",
		"image: docker.io/library/memcached:1.6.39-alpine",
		"\n---\n",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("memcached.yaml after render lacks %q:\n%s", want, rendered)
		}
	}
	if strings.Contains(rendered, "config.kubernetes.io") {
		t.Errorf("kpt's annotations leaked into the file:\n%s", rendered)
	}
	if kptfile := run.ReadFile(t, filepath.Join(pkg, "Kptfile")); kptfile != run.ReadFile(t, filepath.Join("testdata", "kpt-package", "Kptfile")) {
		t.Errorf("the Kptfile changed:\n%s", kptfile)
	}

	// Rendering again is a no-op.
	if again := render(); again.ExitCode != 0 || infos(again.Steps[0]) != 0 {
		t.Errorf("second render changed something (exit %d):\n%s", again.ExitCode, again.Output)
	}

	// An invalid config: kpt fails with the function's error, files untouched.
	write(t, config, strings.Replace(run.ReadFile(t, config), "count: 3", "count: -3", 1))
	failed := render()
	if failed.ExitCode == 0 {
		t.Errorf("kpt fn render passed with an invalid config:\n%s", failed.Output)
	}
	if !strings.Contains(failed.Output, "replicas[0].count: -3 is negative") {
		t.Errorf("kpt's output does not carry the function's error:\n%s", failed.Output)
	}
	if after := run.ReadFile(t, filepath.Join(pkg, "memcached.yaml")); after != rendered {
		t.Errorf("a failed run changed the package:\n%s", after)
	}
}

func infos(s kpt.StepResult) int {
	n := 0
	for _, r := range s.Results {
		if r.Severity == "info" {
			n++
		}
	}
	return n
}

// 3. Standalone: CONFIG and files, or CONFIG and stdin; errors exit 1 and
// print nothing on stdout.
func TestStandaloneBinary(t *testing.T) {
	bin := binaries(t, "set-image-replicas")["set-image-replicas"]
	config := filepath.Join("testdata", "kpt-package", "pins.yaml")
	resources := filepath.Join("testdata", "base", "memcached.yaml")

	out, stderr, code := run.Command(t, nil, bin, config, resources)
	if code != 0 || !strings.Contains(out, "size: 3") || !strings.Contains(out, "image: memcached:1.6.39-alpine") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "[info]") {
		t.Errorf("standalone runs report their changes on stderr, got %q", stderr)
	}

	out, _, code = run.Command(t, []byte(run.ReadFile(t, resources)), bin, config)
	if code != 0 || !strings.Contains(out, "size: 3") {
		t.Errorf("CONFIG with resources on stdin: exit %d\n%s", code, out)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	write(t, bad, strings.Replace(run.ReadFile(t, config), "newTag: 1.6.39-alpine", "newTag: '1.6 39'", 1))
	out, stderr, code = run.Command(t, nil, bin, bad, resources)
	if code != 1 || out != "" {
		t.Errorf("invalid config: exit %d, stdout %q", code, out)
	}
	if !strings.Contains(stderr, `images[0].newTag: "1.6 39" is not a valid tag`) {
		t.Errorf("stderr does not name the field: %q", stderr)
	}
}

// 4. Container: the image holds a static binary run as the nonroot user.
// test/ship builds the real image (and checks the Dockerfile against it);
// here bin/set-image-replicas, built the same way, runs as the image runs
// it: no environment, no home, an unprivileged user.
func TestContainerImageRecipe(t *testing.T) {
	bin := binaries(t, "set-image-replicas")["set-image-replicas"]
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked; distroless/static has no libc", bin)
		}
	}

	in := `apiVersion: config.kubernetes.io/v1
kind: ResourceList
functionConfig: {apiVersion: v1, kind: ConfigMap, metadata: {name: set-image}, data: {name: memcached, newTag: "1.6.39"}}
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: m, image: memcached}]}}
`
	// Where the image puts it, in a directory any user can reach: the
	// checkout (or the temporary directory above it) may be private to its
	// owner.
	root, err := os.MkdirTemp("", "set-image-replicas-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(root, "usr", "local", "bin", "set-image-replicas")
	if err := os.MkdirAll(filepath.Dir(image), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(image, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(image)
	cmd.Env = []string{}
	cmd.Dir = "/"
	who := fmt.Sprintf("as uid %d", os.Getuid())
	// Root can become the image's user; anyone else already is an
	// unprivileged one.
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		who = "as uid 65532"
	}
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s with an empty environment: %v (%s must be reachable by that user)", who, err, root)
	}
	if !strings.Contains(string(out), "memcached:1.6.39") {
		t.Errorf("output:\n%s", out)
	}
}
