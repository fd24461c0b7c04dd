package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/gitserver"
	"github.com/example/memcached-operator/test/internal/kpt"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// gitRepo copies the repository's overlays and scripts into a fresh Git
// repository with bin/ linked in, so a test can render and ask git what
// changed.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := scratchRepo(t)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "as committed")
	return dir
}

var git = gitserver.Git

// newerKptStatus is the status block kpt v1.0.0-beta.65 and later write into
// the root Kptfile on every render (a Rendered condition and renderStatus,
// here for prod's two mutators), which bin/kpt (beta.61) refuses to read.
const newerKptStatus = `status:
  conditions:
    - type: Rendered
      status: "True"
      reason: RenderSuccess
  renderStatus:
    mutationSteps:
      - exec: set-image-replicas
        exitCode: 0
      - exec: set-image-replicas
        exitCode: 0
`

// kpt, for real: bin/kpt is kpt's own render command from the newest
// release the Go module proxy serves (v1.0.0-beta.61). The Kptfiles are
// committed as it leaves them, without a status block, so the documented
// command (docs/environments.md), typed at the repository root, renders a
// clean tree and leaves it clean, twice.
func TestKptRendersOverlaysFromTheRoot(t *testing.T) {
	bins, err := repo.Bin("kpt", "set-image-replicas")
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Dir(bins["kpt"])
	dir := gitRepo(t)

	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			pkg := filepath.Join("overlays", env)
			for round := 1; round <= 2; round++ {
				r, err := kpt.Render(dir, pkg, binDir)
				if err != nil {
					t.Fatal(err)
				}
				if r.ExitCode != 0 {
					t.Fatalf("render %d: exit %d:\n%s", round, r.ExitCode, r.Output)
				}
				if changed := git(t, dir, "status", "--porcelain", "--", pkg); changed != "" {
					t.Errorf("render %d of a clean tree changed files:\n%s", round, changed)
				}
			}
		})
	}

	// make pin and make kpt-render render every overlay and leave the tree
	// exactly as committed.
	for _, env := range envs {
		if out, code := pins(t, dir, nil, "render", env); code != 0 {
			t.Fatalf("pins render %s: exit %d\n%s", env, code, out)
		}
	}
	if changed := git(t, dir, "status", "--porcelain"); changed != "" {
		t.Errorf("rendering every overlay changed the tree:\n%s", changed)
	}

	// A Kptfile that a newer kpt has rendered carries a status block that
	// bin/kpt refuses to read; make pin and make kpt-render render a copy
	// without it, so it still renders, and the Kptfile stays as it was.
	kptfile := filepath.Join(dir, "overlays", "prod", "Kptfile")
	withStatus := run.ReadFile(t, kptfile) + newerKptStatus
	if err := os.WriteFile(kptfile, []byte(withStatus), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := kpt.Render(dir, filepath.Join("overlays", "prod"), binDir); err != nil || r.ExitCode == 0 || !strings.Contains(r.Output, "field renderStatus not found") {
		t.Errorf("bin/kpt read a Kptfile with status.renderStatus (%v, exit %d): the fallback below is no longer needed\n%s", err, r.ExitCode, r.Output)
	}
	if out, code := pins(t, dir, nil, "render", "prod"); code != 0 {
		t.Fatalf("pins render prod with a newer kpt's status: exit %d\n%s", code, out)
	}
	if got := run.ReadFile(t, kptfile); got != withStatus {
		t.Errorf("pins render rewrote the Kptfile:\n%s", got)
	}
	if changed := strings.TrimSpace(git(t, dir, "status", "--porcelain")); changed != "M overlays/prod/Kptfile" {
		t.Errorf("pins render with a newer kpt's status changed more than the status written here:\n%s", changed)
	}
}

// kpt resolves an exec function's path against the directory kpt runs in,
// not against the package: a Kptfile that says ../../bin/set-image-replicas
// works only from inside the overlay. That is why the overlays name the
// function alone and the Makefile puts bin/ on PATH.
func TestKptResolvesExecPathsFromTheWorkingDirectory(t *testing.T) {
	bins, err := repo.Bin("kpt", "set-image-replicas")
	if err != nil {
		t.Fatal(err)
	}
	dir := gitRepo(t)
	pkg := filepath.Join("overlays", "prod")
	kptfile := filepath.Join(dir, pkg, "Kptfile")
	relative := strings.ReplaceAll(run.ReadFile(t, kptfile), "exec: set-image-replicas", "exec: ../../bin/set-image-replicas")
	if err := os.WriteFile(kptfile, []byte(relative), 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := kpt.Render(dir, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == 0 || !strings.Contains(r.Output, "fork/exec ../../bin/set-image-replicas: no such file or directory") {
		t.Errorf("from the root: exit %d, want kpt to miss ../../bin/set-image-replicas:\n%s", r.ExitCode, r.Output)
	}
	r, err = kpt.Render(filepath.Join(dir, pkg), ".")
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 {
		t.Errorf("inside the overlay: exit %d:\n%s", r.ExitCode, r.Output)
	}
	_ = bins
}

// A typo in an overlay's pins fails kpt's render, exactly as it fails the
// function on plain manifests (failOnEmptyMatch), and writes nothing: no
// dead entry appears in a kustomization.
func TestKptRenderFailsOnATypo(t *testing.T) {
	bins, err := repo.Bin("kpt", "set-image-replicas")
	if err != nil {
		t.Fatal(err)
	}
	dir := gitRepo(t)
	pkg := filepath.Join("overlays", "prod")
	images := filepath.Join(dir, pkg, "images.yaml")
	if err := os.WriteFile(images, []byte(strings.Replace(run.ReadFile(t, images), "- name: memcached\n", "- name: memcahced\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := kpt.Render(dir, pkg, filepath.Dir(bins["kpt"]))
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == 0 || !strings.Contains(r.Output, "(name memcahced) matched no image in the input and no entry of a kustomization") {
		t.Errorf("kpt rendered a typo: exit %d\n%s", r.ExitCode, r.Output)
	}
	if changed := strings.TrimSpace(git(t, dir, "status", "--porcelain")); strings.Contains(changed, "kustomization.yaml") {
		t.Errorf("a failed render changed kustomizations:\n%s", changed)
	}
}
