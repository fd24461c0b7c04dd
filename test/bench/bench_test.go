package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The seed manager runs as this same binary in a child process.
	if kubeconfig := os.Getenv("BENCH_SEED_KUBECONFIG"); kubeconfig != "" {
		if err := RunSeedManager(kubeconfig, os.Getenv("BENCH_SEED_METRICS")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The harness at N=20, once: every contender converges, and a resync of the
// operator writes nothing. Times are not asserted; `make bench` reports them.
func TestHarnessSmall(t *testing.T) {
	ms, err := Run(context.Background(), Config{
		Sizes:       []int{20},
		Runs:        1,
		SeedCommand: []string{os.Args[0]},
		Progress:    testWriter{t},
		Timeout:     2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.Contender] = true
		t.Logf("%+v", m)
		if m.Contender == Operator {
			if m.ResyncWrites != 0 {
				t.Errorf("a resync of converged CRs made %.2f writes per CR, want 0", m.ResyncWrites)
			}
			if m.Errors != 0 {
				t.Errorf("the operator logged %d errors", m.Errors)
			}
		}
	}
	for _, c := range []string{Operator, Floor, Seed} {
		if !seen[c] {
			t.Errorf("no measurement for %s", c)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
