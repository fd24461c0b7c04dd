package fn_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
	"github.com/example/memcached-operator/krm-functions/set-image-replicas/fn"
)

// Apply writes what the binary's standalone mode writes, byte for byte, for
// the standalone golden case, and refuses what the binary refuses.
func TestApplyIsTheBinary(t *testing.T) {
	dir := filepath.Join("..", "testdata", "standalone", "pin-files")
	rawConfig, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := v1alpha1.Decode(rawConfig)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := fn.Apply(cfg, in)
	if err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "set-image-replicas")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("build the binary: %v\n%s", err, out)
	}
	want, err := exec.Command(bin, "--quiet", filepath.Join(dir, "config.yaml"), filepath.Join(dir, "input.yaml")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Apply wrote\n%s\nthe binary\n%s", got, want)
	}

	typo := fn.New("typo")
	typo.FailOnEmptyMatch = true
	typo.Images = []v1alpha1.Image{{Name: "memcahced", NewTag: "1.6.40"}}
	out, err := fn.Apply(typo, in)
	if err == nil || !strings.Contains(err.Error(), "matched no image") || out != nil {
		t.Errorf("a rule matching nothing: got %q and %v, want the function's error and no output", out, err)
	}
}
