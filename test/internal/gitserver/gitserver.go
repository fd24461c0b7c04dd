// Package gitserver serves Git repositories over smart HTTP from inside a
// test, with Git's own server side (git http-backend behind net/http/cgi),
// so that GitOps controllers clone from it exactly as from a forge.
package gitserver

import (
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Server serves the bare repositories in Root as http://<addr>/<name>.git.
type Server struct {
	Root string
	URL  string
}

// Start serves a new, empty directory of repositories until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v (the tests need git)", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v", err)
	}
	root := t.TempDir()
	srv := httptest.NewServer(&cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	return &Server{Root: root, URL: srv.URL}
}

// Publish creates the bare repository name.git from the work tree at dir
// (a Git repository) and pushes every branch and tag to it. It returns the
// repository's URL.
func (s *Server) Publish(t testing.TB, dir, name string) string {
	t.Helper()
	bare := filepath.Join(s.Root, name+".git")
	Git(t, s.Root, "init", "-q", "--bare", bare)
	Git(t, dir, "remote", "add", "served", bare)
	Push(t, dir)
	return fmt.Sprintf("%s/%s.git", s.URL, name)
}

// Push pushes the work tree's branches and tags to the served repository.
func Push(t testing.TB, dir string) {
	t.Helper()
	Git(t, dir, "push", "-q", "--force", "served", "--all")
	Git(t, dir, "push", "-q", "--force", "served", "--tags")
}

// Git runs git in dir with a fixed identity and fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=test@example.com", "-c", "user.name=test", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Snapshot copies the repository's working tree (tracked files and new
// files Git does not ignore, as they are on disk) into a new repository in
// a temporary directory with one commit on main, so a test sees exactly
// what is being tested.
func Snapshot(t testing.TB, repoRoot string) string {
	t.Helper()
	out := Git(t, repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		src := filepath.Join(repoRoot, f)
		info, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		if info.IsDir() {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "init", "-q")
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-qm", "snapshot of the working tree")
	return dir
}
