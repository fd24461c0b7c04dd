package pins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Diff reports, per environment, each object a change adds, removes or
// changes against a Git ref, and leaves the working tree alone.
func TestDiff(t *testing.T) {
	root := t.TempDir()
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
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	configMap := func(name, value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: cache\ndata:\n  size: \"" + value + "\"\n"
	}
	write("overlays/dev/kustomization.yaml", "resources:\n- kept.yaml\n- changed.yaml\n- removed.yaml\n")
	write("overlays/dev/kept.yaml", configMap("kept", "1"))
	write("overlays/dev/changed.yaml", configMap("changed", "1"))
	write("overlays/dev/removed.yaml", configMap("removed", "1"))
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "base")

	write("overlays/dev/kustomization.yaml", "resources:\n- kept.yaml\n- changed.yaml\n- added.yaml\n")
	write("overlays/dev/changed.yaml", configMap("changed", "2"))
	write("overlays/dev/added.yaml", configMap("added", "1"))

	var out strings.Builder
	summaries, err := (&Repo{Root: root}).Diff(&out, "HEAD", []string{"dev"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (DiffSummary{Env: "dev", Added: 1, Removed: 1, Changed: 1}); len(summaries) != 1 || summaries[0] != want {
		t.Errorf("summaries %+v, want [%+v]", summaries, want)
	}
	for _, want := range []string{
		"+ ConfigMap cache/added\n",
		"- ConfigMap cache/removed\n",
		"~ ConfigMap cache/changed\n",
		"-  size: \"1\"\n",
		"+  size: \"2\"\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the diff lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "cache/kept") {
		t.Errorf("an unchanged object is reported:\n%s", out.String())
	}

	if _, err := (&Repo{Root: root}).Diff(&out, "no-such-ref", []string{"dev"}); err == nil || !strings.Contains(err.Error(), "BASE must be") {
		t.Errorf("an unknown ref: %v, want an error that says what BASE must be", err)
	}
}
