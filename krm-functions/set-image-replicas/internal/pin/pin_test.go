package pin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/fn/framework/frameworktestutil"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// update regenerates the expected files: go test ./internal/pin -update
var update = os.Getenv("UPDATE_GOLDEN") != ""

// Golden tests: testdata/success/<case>/input.yaml is a ResourceList and
// expected.yaml the ResourceList the function writes, results included;
// testdata/error/<case>/errors.txt holds one regular expression per line
// that the error must match.
func TestGolden(t *testing.T) {
	for dir, minCases := range map[string]int{"success": 11, "error": 15} {
		checker := frameworktestutil.ProcessorResultsChecker{
			TestDataDirectory: filepath.Join("testdata", dir),
			Processor:         func() framework.ResourceListProcessor { return &Processor{} },
			// Error fixtures are hand-written regular expressions; only
			// the success outputs are regenerated.
			UpdateExpectedFromActual: update && dir == "success",
		}
		checker.Assert(t)
		if n := len(checker.TestCasesRun()); n < minCases {
			t.Errorf("ran %d cases in testdata/%s, want at least %d", n, dir, minCases)
		}
	}
}

// A failing run writes no items: a runner that ignores the exit code still
// cannot apply half-pinned manifests.
func TestErrorsWriteNoItems(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "error", "*"))
	if err != nil || len(dirs) < 15 {
		t.Fatalf("want at least 15 error cases, found %d (%v)", len(dirs), err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = framework.Execute(&Processor{}, &kio.ByteReadWriter{Reader: bytes.NewReader(in), Writer: &out})
			if err == nil {
				t.Fatal("want an error")
			}
			if out.Len() == 0 {
				return // the input could not even be read
			}
			rl, perr := yaml.Parse(out.String())
			if perr != nil {
				t.Fatalf("output is not YAML: %v\n%s", perr, out.String())
			}
			items, _ := rl.Pipe(yaml.Lookup("items"))
			if items != nil && len(items.YNode().Content) > 0 {
				t.Errorf("a failed run wrote %d items:\n%s", len(items.YNode().Content), out.String())
			}
			results, _ := rl.Pipe(yaml.Lookup("results"))
			if results == nil || !strings.Contains(results.MustString(), "severity: error") {
				t.Errorf("a failed run must report error results:\n%s", out.String())
			}
		})
	}
}

// Running the function on its own output changes nothing: pins are
// idempotent, which is what makes `kpt fn render` safe to run on every commit.
func TestIdempotent(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "success", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			first := run(t, mustRead(t, filepath.Join(dir, "input.yaml")))
			rl, err := yaml.Parse(first)
			if err != nil {
				t.Fatal(err)
			}
			_ = rl.PipeE(yaml.Clear("results"))
			second := run(t, rl.MustString())
			if strings.Contains(second, "severity: info") {
				t.Errorf("second run changed something:\n%s", second)
			}
		})
	}
}

func run(t *testing.T, in string) string {
	t.Helper()
	var out bytes.Buffer
	if err := framework.Execute(&Processor{}, &kio.ByteReadWriter{Reader: strings.NewReader(in), Writer: &out}); err != nil {
		t.Fatalf("run: %v", err)
	}
	return out.String()
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
