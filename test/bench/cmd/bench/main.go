// Command bench runs the repository's benchmarks and writes
// docs/benchmarks.md: the operator against the equal-work and objects-only
// write floors and the seed tutorial's reconciler, its change latency,
// kustomize builds of the overlays, and the set-image-replicas function
// against kustomize's transformers. The figures are kept in
// docs/benchmarks.json; a run replaces those it measured again and keeps the
// others with their dates.
//
//	make bench                                          # N=100 and 1000, three runs each
//	make bench BENCH_ARGS='-n 10000 -runs 1 -krm=false' # N=10,000, keeping the rest
//	go run ./test/bench/cmd/bench -n 20 -runs 1 -krm=false -out ''
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/example/memcached-operator/test/bench"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
)

func main() {
	// The seed manager is this same binary in a child process.
	if kubeconfig := os.Getenv("BENCH_SEED_KUBECONFIG"); kubeconfig != "" {
		if err := bench.RunSeedManager(kubeconfig, os.Getenv("BENCH_SEED_METRICS")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	sizes := flag.String("n", "100,1000", "comma-separated numbers of Memcached CRs")
	runs := flag.Int("runs", 3, "runs per contender and size; the report shows medians")
	out := flag.String("out", "docs/benchmarks.md", "where to write the Markdown report, with its figures beside it as .json (empty: stdout only)")
	contenders := flag.String("contenders", strings.Join(bench.Contenders, ","), "comma-separated contenders to run (the floors repeat the operator's writes, so they need it)")
	changes := flag.Int("changes", 50, "scale and hand changes timed on the converged operator, each (0: none)")
	krm := flag.Bool("krm", true, "also run BenchmarkSetImageReplicas against kustomize's transformers")
	krmSize := flag.Int("krm-resources", 10000, "resources in the set-image-replicas benchmark")
	operatorArgs := flag.String("operator-args", "", "extra bin/manager flags, space-separated (to try settings; the report measures the defaults)")
	renderOnly := flag.Bool("render", false, "only render the report from its .json (after a change to the report's layout)")
	manager := flag.String("manager", "", "operator binary to measure instead of bin/manager (to compare builds; -out '' keeps the report)")
	profileDir := flag.String("profile-dir", "", "write a CPU profile of kube-apiserver during each controller's convergence into this directory (go tool pprof)")
	controlPlane := flag.Bool("controlplane", true, "measure the operator against the floors and the seed (-n), its change latency and kustomize builds")
	dataPlane := flag.Bool("dataplane", true, "measure cache pods on 3 real nodes (root, Linux): each container's memory and CPU, clients' throughput and latency with TLS and auth, and through a rollout")
	dataPlaneLoad := flag.Duration("dataplane-load", 20*time.Second, "how long each client run of the data-plane section measures")
	dataPlaneRollout := flag.Duration("dataplane-rollout", 90*time.Second, "how long the client runs across each rollout")
	flag.Parse()

	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-n %q: want positive numbers", *sizes)
		}
		ns = append(ns, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	root, err := repo.Root()
	if err != nil {
		return err
	}
	var results bench.Results
	jsonPath := ""
	if *out != "" {
		jsonPath = filepath.Join(root, strings.TrimSuffix(*out, ".md")+".json")
		if raw, err := os.ReadFile(jsonPath); err == nil {
			if err := json.Unmarshal(raw, &results); err != nil {
				return fmt.Errorf("%s: %w", jsonPath, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}

	if *renderOnly {
		if jsonPath == "" {
			return errors.New("-render needs -out")
		}
		if results.Cores == 0 { // figures from before the field existed, measured here
			results.Cores = runtime.NumCPU()
		}
		return write(root, *out, jsonPath, results)
	}

	newer := bench.Results{Machine: proc.Machine(), Versions: load.Versions(), Cores: runtime.NumCPU()}
	if *controlPlane {
		ms, err := bench.Run(context.Background(), bench.Config{Sizes: ns, Runs: *runs, SeedCommand: []string{self}, Progress: os.Stderr,
			OperatorArgs: strings.Fields(*operatorArgs), ProfileDir: *profileDir, Contenders: strings.Split(*contenders, ","), Changes: *changes, Manager: *manager})
		if err != nil {
			return err
		}
		newer.Measurements = bench.Medians(ms)
		fmt.Fprintln(os.Stderr, "bench: kustomize build of the overlays ...")
		if newer.Kustomize, err = bench.KustomizeBuilds([]string{"overlays/dev", "overlays/staging", "overlays/prod"}, 9); err != nil {
			return err
		}
	}
	if *dataPlane {
		if newer.DataPlane, err = bench.RunDataPlane(context.Background(), bench.DataPlaneConfig{Load: *dataPlaneLoad, Rollout: *dataPlaneRollout, Progress: os.Stderr}); err != nil {
			return fmt.Errorf("data plane: %w", err)
		}
	}
	if *krm {
		if newer.KRM, err = krmBenchmark(*krmSize); err != nil {
			return err
		}
		newer.KRMSize, newer.KRMDate = *krmSize, time.Now().UTC().Format(time.DateOnly)
	}
	results.Merge(newer)

	fmt.Print(bench.Markdown(results))
	if *out == "" {
		return nil
	}
	return write(root, *out, jsonPath, results)
}

// write saves the figures as JSON and the report rendered from them.
func write(root, out, jsonPath string, results bench.Results) error {
	raw, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(root, out)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := errors.Join(os.WriteFile(path, []byte(bench.Markdown(results)), 0o644), os.WriteFile(jsonPath, append(raw, '\n'), 0o644)); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: wrote", out, "and", filepath.Base(jsonPath))
	return nil
}

// krmBenchmark runs BenchmarkSetImageReplicas with `go test`: the function
// three times, kustomize once (quadratic in the number of resources, it
// takes minutes at 10,000).
func krmBenchmark(resources int) ([]bench.GoBenchmark, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	var out []bench.GoBenchmark
	for _, sub := range []struct {
		name  string
		count string
	}{{"set-image-replicas", "3"}, {"kustomize-images-replicas", "1"}} {
		fmt.Fprintf(os.Stderr, "bench: BenchmarkSetImageReplicas/%s at %d resources ...\n", sub.name, resources)
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkSetImageReplicas/"+sub.name+"$",
			"-benchtime", "1x", "-count", sub.count, "-benchmem", "-timeout", "60m", "./internal/pin")
		cmd.Dir = filepath.Join(root, "krm-functions", "set-image-replicas")
		cmd.Env = append(os.Environ(), "BENCH_RESOURCES="+strconv.Itoa(resources))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go test -bench %s: %w\n%s", sub.name, err, stdout)
		}
		var runs []bench.GoBenchmark
		sc := bufio.NewScanner(strings.NewReader(string(stdout)))
		for sc.Scan() {
			if g, ok := parseBenchLine(sc.Text()); ok {
				g.Name = sub.name
				runs = append(runs, g)
			}
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("no benchmark result for %s in:\n%s", sub.name, stdout)
		}
		out = append(out, median(runs))
	}
	return out, nil
}

func parseBenchLine(line string) (bench.GoBenchmark, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkSetImageReplicas/") {
		return bench.GoBenchmark{}, false
	}
	var g bench.GoBenchmark
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			continue
		}
		switch f[i+1] {
		case "ns/op":
			g.NsPerOp = v
		case "B/op":
			g.BytesPerOp = v
		case "allocs/op":
			g.AllocsPerOp = v
		}
	}
	return g, g.NsPerOp > 0
}

func median(gs []bench.GoBenchmark) bench.GoBenchmark {
	best := gs[0]
	if len(gs) >= 3 {
		// Sort by time and take the middle one.
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				if gs[j].NsPerOp < gs[i].NsPerOp {
					gs[i], gs[j] = gs[j], gs[i]
				}
			}
		}
		best = gs[len(gs)/2]
	}
	return best
}
