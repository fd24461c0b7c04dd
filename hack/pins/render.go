package pins

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Render writes env's pins (images.yaml, replicas.yaml) into its
// kustomizations with `kpt fn render --allow-exec`, bin/ first on PATH so
// the Kptfile's `exec: set-image-replicas` is bin/set-image-replicas. A
// no-op when they are in sync.
//
// bin/kpt is the newest kpt release the Go module proxy serves
// (v1.0.0-beta.61), and the Kptfiles are committed as it leaves them:
// without a status block. kpt v1.0.0-beta.65 and later write one into the
// root Kptfile on every render (Rendered, renderStatus), which releases
// before beta.65 refuse to read. So the render runs on a copy of the package
// whose Kptfile has no status, and what it rewrote is copied back, the
// Kptfile excepted: an overlay a newer kpt has rendered still renders here,
// and its Kptfile stays as that kpt left it. kpt's report is shown only
// when the render fails.
func (r *Repo) Render(env string) error {
	dir, err := r.overlay(env)
	if err != nil {
		return err
	}
	bin := filepath.Join(r.Root, "bin")
	kpt := filepath.Join(bin, "kpt")
	for _, b := range []string{kpt, filepath.Join(bin, "set-image-replicas")} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run 'make tools build' first", r.rel(b))
		}
	}
	scratch, err := os.MkdirTemp("", "pins-render-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.CopyFS(scratch, os.DirFS(dir)); err != nil {
		return err
	}
	if err := dropStatus(filepath.Join(scratch, "Kptfile")); err != nil {
		return err
	}
	cmd := exec.Command(kpt, "fn", "render", scratch, "--allow-exec")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kpt fn render %s failed; nothing was written:\n%s", r.rel(dir), out)
	}
	var writes []write
	err = filepath.WalkDir(scratch, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(scratch, path)
		if rel == "Kptfile" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		writes = append(writes, write{filepath.Join(dir, rel), data})
		return nil
	})
	if err != nil {
		return err
	}
	return r.commit(writes)
}

// dropStatus removes the status block of a Kptfile.
func dropStatus(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	kptfile, err := yaml.Parse(string(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := kptfile.Pipe(yaml.Clear("status")); err != nil {
		return err
	}
	out, err := kptfile.String()
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
