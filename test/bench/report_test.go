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
	for _, retired := range []string{"≤ 2× the objects-only floor", "≤ 0.85× the seed's"} {
		if strings.Contains(md, retired) {
			t.Errorf("report still judges the retired target %q", retired)
		}
	}
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

// The real-node section judges its targets from the figures it shows: the
// reloader at its largest, and each flavor's sidecars against memcached's
// memory beside its items, full; its ratios are to plain on the same path.
func TestDataPlaneTargets(t *testing.T) {
	md := dataPlaneMarkdown(DataPlane{Date: "2026-12-07", Commit: "abc", Memcached: "1.6.18",
		Pods: []PodCost{
			{Flavor: "plain", Container: "memcached", IdleRSSMiB: 4.6},
			{Flavor: "plain", Container: "exporter", IdleRSSMiB: 10.5},
			{Flavor: "tls", Container: "memcached", IdleRSSMiB: 8},
			{Flavor: "tls", Container: "reloader", IdleRSSMiB: 4.6, LoadedRSSMiB: 9},
			{Flavor: "tls", Container: "exporter", IdleRSSMiB: 10.6},
		},
		Full: []FullCost{
			{Flavor: "plain", RSSMiB: 80, ItemsMiB: 64, LimitMiB: 64, Evictions: 10},
			{Flavor: "tls", RSSMiB: 75, ItemsMiB: 64, LimitMiB: 64, Evictions: 10},
		},
		Load: []LoadResult{
			{Flavor: "plain", Path: "pods", OpsPerSecond: 20000, P50Micros: 60, P99Micros: 1000},
			{Flavor: "tls", Path: "pods", OpsPerSecond: 15000, P50Micros: 90, P99Micros: 1500},
		},
	})
	for _, want := range []string{
		"| the reloader ≤ 8 MiB resident per pod | 9.0 MiB (largest, idle or under load) | **missed** |",
		"| plain: the sidecars together ≤ memcached's own memory beside its items, full at the default `maxMemoryMB` | 10.5 MiB vs 16.0 MiB | met |",
		"| tls: the sidecars together ≤ memcached's own memory beside its items, full at the default `maxMemoryMB` | 15.2 MiB vs 11.0 MiB | **missed** |",
		"| tls-auth: the sidecars together ≤ memcached's own memory beside its items, full at the default `maxMemoryMB` | 0.0 MiB vs not measured | **not measured** |",
		"| plain | 80.0 MiB | 64.0 MiB of 64 | 16.0 MiB | 10 |",
		"| tls | pods | 15000 | 0.75× | 90µs | 1.5ms | 1.50× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the real-node section lacks %q:\n%s", want, md)
		}
	}
}
