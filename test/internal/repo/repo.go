// Package repo locates the repository and the toolchain that `make tools`
// builds into bin/, so tests in any package find them the same way.
package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// Root is the repository root: the nearest directory above the working
// directory that holds go.work.
func Root() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("no go.work above the working directory: run the tests from inside the repository")
				return
			}
			dir = parent
		}
	})
	return root, rootErr
}

// MustRoot is Root for tests: it fails the test when there is no root.
func MustRoot(t testing.TB) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Path joins elements onto the repository root.
func Path(elem ...string) (string, error) {
	r, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{r}, elem...)...), nil
}

// BinDir is where `make tools` and `make build` put binaries:
// $KUBEBUILDER_ASSETS when set (the Makefile exports it), else bin/.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return filepath.Abs(dir)
	}
	return Path("bin")
}

// Bin returns the path of each named binary in BinDir, or an error that says
// which are missing and how to build them. Tests fail on it; they never skip.
func Bin(names ...string) (map[string]string, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, n)
			continue
		}
		out[n] = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %v in %s: run `make tools` (the control plane, kwok, kustomize) and `make build` (manager, set-image-replicas) first", missing, dir)
	}
	return out, nil
}
