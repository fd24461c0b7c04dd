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

// stripStatus is the Kptfile as kpt releases before v1.0.0-beta.65 can read
// it: without the status block newer releases write.
func stripStatus(t *testing.T, kptfile string) {
	t.Helper()
	s := run.ReadFile(t, kptfile)
	if i := strings.Index(s, "\nstatus:\n"); i >= 0 {
		s = s[:i+1]
	}
	if err := os.WriteFile(kptfile, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kpt, for real. bin/kpt is kpt's own render command from the newest
// release the Go module proxy serves (v1.0.0-beta.61); what kpt's current
// source does to the Kptfile on top of it (the status block) is encoded in
// test/internal/kpt from that source.
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
			kptfile := filepath.Join(dir, pkg, "Kptfile")
			committed := run.ReadFile(t, kptfile)

			// The release here cannot read what current kpt writes; the
			// error says so (this is why make kpt-render renders a copy).
			r, err := kpt.Render(dir, pkg, binDir)
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode == 0 || !strings.Contains(r.Output, "field renderStatus not found") {
				t.Errorf("kpt v1.0.0-beta.61 read a Kptfile with status.renderStatus (exit %d):\n%s", r.ExitCode, r.Output)
			}

			// The documented command (docs/environments.md), typed at the repository root: exec
			// functions named without a path are looked up on PATH.
			stripStatus(t, kptfile)
			for round := 1; round <= 2; round++ {
				r, err = kpt.Render(dir, pkg, binDir)
				if err != nil {
					t.Fatal(err)
				}
				if r.ExitCode != 0 {
					t.Fatalf("render %d: exit %d:\n%s", round, r.ExitCode, r.Output)
				}
				if changed := strings.TrimSpace(git(t, dir, "status", "--porcelain", "--", pkg)); changed != "M "+pkg+"/Kptfile" && changed != " M "+pkg+"/Kptfile" {
					t.Errorf("render %d of a clean tree changed files:\n%s", round, changed)
				}
			}

			// What kpt's current source then writes into the Kptfile is
			// exactly what is committed, so its render leaves git clean.
			head, err := kpt.HeadKptfile([]byte(committed), r.Steps)
			if err != nil {
				t.Fatal(err)
			}
			if string(head) != committed {
				t.Errorf("the committed Kptfile is not what current kpt writes after a render; commit this:\n%s", head)
			}
			again, err := kpt.HeadKptfile(head, r.Steps)
			if err != nil || string(again) != string(head) {
				t.Errorf("a second render by current kpt would change the Kptfile again (%v):\n%s", err, again)
			}
			git(t, dir, "checkout", "--", pkg)
		})
	}

	// make pin and make kpt-render render a copy without the status and
	// leave the tree exactly as committed.
	for _, env := range envs {
		if out, code := pins(t, dir, nil, "render", env); code != 0 {
			t.Fatalf("pins render %s: exit %d\n%s", env, code, out)
		}
	}
	if changed := git(t, dir, "status", "--porcelain"); changed != "" {
		t.Errorf("rendering every overlay changed the tree:\n%s", changed)
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
	stripStatus(t, kptfile)
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
	stripStatus(t, filepath.Join(dir, pkg, "Kptfile"))
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
