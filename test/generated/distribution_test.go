package generated

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/repo"
)

// The distribution files hack/cmd/generate writes from deploy/: the
// monitoring objects, alerts and dashboard, the Helm chart, the OLM bundle and its Dockerfile, and
// the file-based catalog.
var distribution = []string{
	"deploy/prometheus",
	"deploy/helm/memcached-operator",
	"bundle",
	"bundle.Dockerfile",
	"catalog",
}

// The committed distribution files are what `make manifests` (hack/cmd/
// generate) writes from the committed deploy/; a hand edit to any of them
// fails here.
func TestDistributionFilesAreCurrent(t *testing.T) {
	root := repo.MustRoot(t)
	scratch := t.TempDir()
	generate := filepath.Join(scratch, "generate")
	build := exec.Command("go", "build", "-o", generate, "./hack/cmd/generate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the generator: %v\n%s", err, out)
	}
	// Regenerate in a copy, so the test never rewrites the working tree.
	// The catalog is an input too: it keeps earlier releases' bundles.
	work := filepath.Join(scratch, "repo")
	for _, p := range []string{"deploy", "docs/icon.svg", "catalog", "bundle", "bundle.Dockerfile"} {
		copyPath(t, filepath.Join(root, p), filepath.Join(work, p))
	}
	cmd := exec.Command(generate, "prometheus", "helm-chart", "bundle", "catalog")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate: %v\n%s", err, out)
	}
	if diffs := compareTrees(root, work, distribution); len(diffs) > 0 {
		t.Errorf("stale distribution files; run `make manifests` and commit the result:\n%s", strings.Join(diffs, "\n"))
	}

	t.Run("a hand edit is caught", func(t *testing.T) {
		edited := filepath.Join(t.TempDir(), "repo")
		for _, p := range distribution {
			copyPath(t, filepath.Join(root, p), filepath.Join(edited, p))
		}
		csv := filepath.Join(edited, "bundle", "manifests", "memcached-operator.clusterserviceversion.yaml")
		b, err := os.ReadFile(csv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(csv, bytes.Replace(b, []byte("capabilities: Seamless Upgrades"), []byte("capabilities: Auto Pilot"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(edited, "deploy/helm/memcached-operator/templates/extra.yaml"), []byte("kind: ConfigMap\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		diffs := compareTrees(edited, work, distribution)
		if len(diffs) != 2 {
			t.Fatalf("want the edited CSV and the added template reported, got %q", diffs)
		}
	})
}

// compareTrees lists the files under paths that differ between two roots,
// or exist in only one.
func compareTrees(committed, fresh string, paths []string) []string {
	files := map[string]bool{}
	for _, root := range []string{committed, fresh} {
		for _, p := range paths {
			_ = filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(root, path)
					files[rel] = true
				}
				return nil
			})
		}
	}
	var diffs []string
	for f := range files {
		a, errA := os.ReadFile(filepath.Join(committed, f))
		b, errB := os.ReadFile(filepath.Join(fresh, f))
		switch {
		case errA != nil:
			diffs = append(diffs, f+": not committed")
		case errB != nil:
			diffs = append(diffs, f+": no longer generated")
		case !bytes.Equal(a, b):
			diffs = append(diffs, f+": differs")
		}
	}
	sort.Strings(diffs)
	return diffs
}

func copyPath(t *testing.T, from, to string) {
	t.Helper()
	info, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if info.IsDir() {
		if err := os.CopyFS(to, os.DirFS(from)); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
