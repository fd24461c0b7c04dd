package pins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TagRelease commits only the environment's pins, tags that commit, and
// refuses to move a tag that exists.
func TestTagRelease(t *testing.T) {
	root := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", root, "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("overlays/staging/kustomization.yaml", "resources: []\n")
	write("overlays/staging/images.yaml", "old\n")
	write("README.md", "old\n")
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "base")
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")

	write("overlays/staging/images.yaml", "pinned\n")
	write("README.md", "an unrelated edit\n")
	r := &Repo{Root: root}
	if err := r.TagRelease("staging", "v0.2.0", "registry.example.com/memcached-operator:v0.2.0@sha256:1"); err != nil {
		t.Fatal(err)
	}
	if got := git("show", "v0.2.0:overlays/staging/images.yaml"); got != "pinned\n" {
		t.Errorf("the tag holds staging's pins %q, want the new ones", got)
	}
	if got := git("show", "v0.2.0:README.md"); got != "old\n" {
		t.Errorf("the release commit took an unrelated edit: README.md %q", got)
	}
	if err := r.TagRelease("staging", "v0.2.0", "x"); err == nil || !strings.Contains(err.Error(), "tag v0.2.0 exists") {
		t.Errorf("an existing tag: %v, want a refusal that says so", err)
	}
}
