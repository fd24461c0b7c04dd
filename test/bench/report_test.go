package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/internal/repo"
)

// A run of one size replaces that size's figures and keeps the others with
// their dates; the targets are judged at the sizes they are set for.
func TestResultsMergeAndTargets(t *testing.T) {
	old := Results{Machine: "m", Measurements: []Measurement{
		{Contender: Operator, N: 10000, Date: "2026-12-01", Runs: 1, Converge: 200 * time.Second, PeakRSSMiB: 280, Controller: true},
		{Contender: Operator, N: 1000, Date: "2026-12-01", Runs: 3, Converge: 30 * time.Second, Controller: true},
	}}
	old.Merge(Results{Machine: "m2", Measurements: []Measurement{
		{Contender: FloorEqual, N: 1000, Date: "2026-12-03", Runs: 3, Converge: 16 * time.Second, Writes: 6},
		{Contender: Operator, N: 1000, Date: "2026-12-03", Runs: 3, Converge: 20 * time.Second, CPUSeconds: 1.5, PeakRSSMiB: 70,
			Controller: true, ScaleP99: 40 * time.Millisecond, HealP99: 600 * time.Millisecond, ResyncWrites: 0,
			ClusterCPU: 27, Served: map[string]float64{"POST": 5, "APPLY": 1, "PATCH": 1, "GET": 0.04}, EtcdBytes: 11878},
		{Contender: Floor, N: 1000, Date: "2026-12-03", Runs: 3, Converge: 5 * time.Second, Writes: 3, ClusterCPU: 9},
		{Contender: Seed, N: 1000, Date: "2026-12-03", Runs: 3, Converge: 6 * time.Second, Writes: 1, PeakRSSMiB: 80, Controller: true},
	}})
	if len(old.Measurements) != 5 {
		t.Fatalf("merged %d measurements, want 3: %+v", len(old.Measurements), old.Measurements)
	}
	md := Markdown(old)
	for _, want := range []string{
		"| 1000 | operator | 2026-12-03 | 3 | 20s | 1.25× |",
		"| 10000 | operator | 2026-12-01 | 1 | 3m20s |",
		"| N=1,000 converged in ≤ 1.25× the equal-work floor | 1.25× (20s vs 16s) | met |",
		"| controller CPU ≤ 2.0 ms per CR (N=1,000) | 1.50 ms | met |",
		"| peak RSS ≤ 64 MiB (N=1,000) | 70 MiB | **missed** |",
		"| N=10,000 in ≤ 11× the N=1,000 time | 10.00× (3m20s) | met |",
		"| change latency p99 ≤ 500 ms (N=1000) | scale 40ms, heal 600ms | **missed** |",
		"| 0 writes on resync (N=10000) | 0.00/CR | met |",
		"Machine: m2.",
		"| 1000 | operator | 2026-12-03 | 27.0 ms | 3.00× | 5.00 | 1.00 | 1.00 | 0.00 | 0.00 | 0.04 | 0.00 | 0.00 | 11.6 KiB |",
		"| 10000 | operator | 2026-12-01 | 0.0 ms | — | — | — | — | — | — | — | — | — | — |",
		"| apiserver+etcd CPU per CR ≤ 2× the objects-only floor (N=1,000) | 3.00× (27.0 s vs 9.0 s) | **missed** |",
		"| peak RSS ≤ 0.85× the seed's, same run (N=1,000) | 0.88× (70 MiB vs 80 MiB) | **missed** |",
		"| N=10,000 resync ≤ 15.8 s with 0 writes | 0s, 0.00 writes/CR | **missed** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// docs/benchmarks.md is rendered from docs/benchmarks.json and nothing else.
func TestBenchmarksDocIsCurrent(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("docs/benchmarks.json: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Markdown(r); got != string(doc) {
		t.Errorf("docs/benchmarks.md is not what docs/benchmarks.json renders to: edited by hand, or the report changed; " +
			"run `go run ./test/bench/cmd/bench -render` (it measures nothing)")
	}
}
