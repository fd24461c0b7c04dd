// Package guide runs the commands the documentation tells users to type,
// verbatim: a guide's ```sh block, found by a marker only it contains, run
// by bash with bin/ first on PATH and KUBECONFIG naming the test's
// cluster. A guide whose step fails fails the test that runs it.
package guide

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/repo"
)

// Block returns the first ```sh block of doc (a path from the repository
// root) that contains marker.
func Block(t testing.TB, doc, marker string) string {
	t.Helper()
	return Fenced(t, doc, "sh", marker)
}

// Fenced returns the first block of doc fenced as lang (```yaml) that
// contains marker: a file, or a part of one, the guide tells users to
// write.
func Fenced(t testing.TB, doc, lang, marker string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repo.MustRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(text), "```"+lang+"\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("%s has no ```%s block with %q", doc, lang, marker)
	return ""
}

// Run runs doc's block with marker under `bash -euo pipefail` in a new
// directory, as a user would in a shell, against the cluster of
// kubeconfig, and returns what it printed.
func Run(t testing.TB, kubeconfig, doc, marker string) string {
	t.Helper()
	script := Block(t, doc, marker)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(repo.MustRoot(t), "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's commands failed: %v\n%s\n%s", doc, err, script, out)
	}
	return string(out)
}
