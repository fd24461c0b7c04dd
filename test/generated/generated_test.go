// Package generated fails when a committed generated file is stale: the
// deepcopy code, the CRD and the RBAC role are regenerated from the
// operator's markers with the pinned controller-gen into a scratch copy and
// compared with what is committed. Fix with `make generate manifests`.
package generated

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/repo"
)

func TestGeneratedFilesAreCurrent(t *testing.T) {
	bins, err := repo.Bin("controller-gen")
	if err != nil {
		t.Fatal(err)
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}

	// Regenerate in a copy of the operator module, so the test never
	// rewrites the working tree.
	scratch := t.TempDir()
	operator := filepath.Join(scratch, "operator")
	copyTree(t, filepath.Join(root, "operator"), operator)
	cmd := exec.Command(bins["controller-gen"],
		"object:headerFile=hack/boilerplate.go.txt",
		"rbac:roleName=memcached-operator-manager-role", "crd", "paths=./...",
		"output:crd:artifacts:config="+filepath.Join(scratch, "crd"),
		"output:rbac:artifacts:config="+filepath.Join(scratch, "rbac"))
	cmd.Dir = operator
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}

	for committed, fresh := range map[string]string{
		"operator/api/v1alpha1/zz_generated.deepcopy.go":     filepath.Join(operator, "api", "v1alpha1", "zz_generated.deepcopy.go"),
		"deploy/crd/bases/cache.example.com_memcacheds.yaml": filepath.Join(scratch, "crd", "cache.example.com_memcacheds.yaml"),
		"deploy/rbac/role.yaml":                              filepath.Join(scratch, "rbac", "role.yaml"),
	} {
		want, err := os.ReadFile(fresh)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, committed))
		if err != nil {
			t.Fatalf("%s: %v (run `make generate manifests`)", committed, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: the operator's markers generate something else; run `make generate manifests` and commit the result", committed)
		}
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
