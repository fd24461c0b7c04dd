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
		Changes:     3,
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*Measurement{}
	for _, m := range ms {
		seen[m.Contender] = &m
		t.Logf("%+v", m)
		if m.Contender == Operator {
			if m.ScaleP50 <= 0 || m.HealP50 <= 0 {
				t.Errorf("change latency not measured: scale p50 %v, heal p50 %v", m.ScaleP50, m.HealP50)
			}
			if m.ResyncWrites != 0 {
				t.Errorf("a resync of converged CRs made %.2f writes per CR, want 0", m.ResyncWrites)
			}
			if m.Errors != 0 {
				t.Errorf("the operator logged %d errors", m.Errors)
			}
		}
	}
	for _, c := range Contenders {
		if seen[c] == nil {
			t.Fatalf("no measurement for %s", c)
		}
	}
	// The control plane's own counters are read for every contender.
	for _, c := range Contenders {
		m := seen[c]
		if m.ClusterCPU <= 0 || m.EtcdBytes <= 0 || m.Served["POST"] <= 0 {
			t.Errorf("%s: control-plane cost not measured: CPU %.2f s, etcd %.0f bytes/CR, served %v", c, m.ClusterCPU, m.EtcdBytes, m.Served)
		}
	}
	// The equal-work floor writes as the operator does, verb by verb (the
	// apiserver's count): creates, the finalizer's apply, the status patch.
	for _, verb := range []string{"POST", "APPLY", "PATCH"} {
		if op, fe := seen[Operator].Served[verb], seen[FloorEqual].Served[verb]; op < fe || op > fe+0.5 {
			t.Errorf("%s requests per CR: the operator %.2f, the equal-work floor %.2f", verb, op, fe)
		}
	}
	// The equal-work floor makes the operator's six writes per new CR
	// (finalizer, the three objects, status, event); the operator makes at
	// least those, more when a write is retried.
	if fe := seen[FloorEqual].Writes; fe != 6 {
		t.Errorf("the equal-work floor made %.2f writes per CR, want 6", fe)
	}
	if op, fe := seen[Operator].Writes, seen[FloorEqual].Writes; op < fe {
		t.Errorf("the operator made %.2f writes per CR, fewer than the equal-work floor's %.2f: the floor does more than the operator", op, fe)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
