package olm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeBundle(t *testing.T) string {
	t.Helper()
	b, err := Generate(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := b.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The generated bundle passes every validator operator-sdk's
// operatorframework suite runs, with no error and no warning.
func TestBundleValidates(t *testing.T) {
	f, err := Validate(writeBundle(t), "1.37")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Errors {
		t.Errorf("error: %s", e)
	}
	for _, w := range f.Warnings {
		t.Errorf("warning: %s", w)
	}
}

// The validators do run: a bundle whose CSV owns a CRD the bundle lacks
// is an error.
func TestBundleValidationCatchesAMissingCRD(t *testing.T) {
	dir := writeBundle(t)
	crds, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.crd.yaml"))
	if len(crds) == 0 {
		t.Fatal("no CRD in the bundle")
	}
	for _, p := range crds {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Validate(dir, "1.37")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(f.Errors, "\n"), `owned CRD "cache.example.com/v1alpha1, Kind=Memcached" not found`) {
		t.Fatalf("want an error naming the missing CRD, got errors %q", f.Errors)
	}
}
