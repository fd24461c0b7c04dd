// Package bench measures the operator against a raw write floor and the
// seed tutorial's reconciler, in the same run on the same kind of control
// plane: a fresh kube-apiserver and etcd (kwokctl's binary runtime, no
// controller-manager or scheduler, so the cluster is not the bottleneck)
// for every measurement.
//
// For N Memcached CRs of size 3 created by 16 concurrent clients it reports
// the time until every CR is converged, the requests the controller sent per
// CR (writes and total, from client-go's own metrics in the controller
// process), the controller's CPU time, peak RSS and logged errors, and the
// requests per CR of a full resync after a restart.
//
// cmd/bench runs it and writes docs/benchmarks.md (`make bench`);
// bench_test.go runs it small in `make test` as a correctness check.
package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/repo"
)

// Contenders, in the order they run: the floors repeat what the operator
// wrote, so it runs first.
const (
	Operator   = "operator"    // bin/manager, default flags
	FloorEqual = "floor-equal" // the operator's own writes per CR, made by the harness, no controller
	Floor      = "floor"       // the operator's three objects created directly, no controller
	Seed       = "seed"        // the tutorial's reconciler
)

// Contenders are all of them, in order.
var Contenders = []string{Operator, FloorEqual, Floor, Seed}

// Config of a benchmark run.
type Config struct {
	Sizes []int // numbers of CRs
	Runs  int   // runs per contender and size; figures are medians
	// SeedCommand starts the seed manager; it reads BENCH_SEED_KUBECONFIG and
	// BENCH_SEED_METRICS from its environment.
	SeedCommand []string
	Progress    io.Writer
	// Timeout for one contender to converge.
	Timeout time.Duration
	// OperatorArgs are extra flags for bin/manager (default: none, the
	// defaults are what is measured).
	OperatorArgs []string
	// ProfileDir, when set, receives CPU profiles of kube-apiserver and of
	// the manager taken while each controller converges
	// (<contender>-<N>-apiserver.pprof, operator-<N>-manager.pprof) and the
	// manager's heap once converged (operator-<N>-manager-heap.pprof).
	ProfileDir string
	// Manager is the operator binary to measure (default: bin/manager): to
	// compare two builds side by side.
	Manager string
	// Contenders to run (default: all). The floors need the operator's run.
	Contenders []string
	// Changes is how many times the change latency is measured for each kind
	// of change once the operator has converged (0: not measured).
	Changes int
}

// Measurement is one contender's run at one size.
type Measurement struct {
	Contender  string
	N          int
	Date       string // YYYY-MM-DD, UTC
	Runs       int    // runs a median was taken over (Medians sets it)
	Converge   time.Duration
	Writes     float64 // per CR
	Requests   float64 // per CR
	CPUSeconds float64
	// AllocKiB and Reconciles are per CR, from the controller's Go runtime
	// and controller-runtime metrics: allocation is the part of its CPU cost
	// that does not vary with a shared machine's load.
	AllocKiB   float64
	Reconciles float64
	PeakRSSMiB float64
	// ScrapeKiB is what one scrape of the controller's /metrics allocates
	// once it has converged (its per-Memcached series included).
	ScrapeKiB  float64 `json:",omitempty"`
	Errors     int
	ClusterCPU float64 // kube-apiserver + etcd CPU seconds while converging
	// Served are the requests kube-apiserver served while converging, per
	// CR, by verb (POST, APPLY, PATCH, GET, LIST, WATCH, ...), from every
	// client; EtcdBytes are the bytes etcd appended to its log per CR.
	Served       map[string]float64 `json:",omitempty"`
	EtcdBytes    float64            `json:",omitempty"`
	ResyncWrites float64            // per CR
	ResyncReqs   float64            // per CR
	ResyncTime   time.Duration
	// Controller: a controller process was measured (CPU, memory, resync);
	// false for the floors, where the harness makes the writes.
	Controller bool
	// Change latency (operator only, when Config.Changes > 0).
	ScaleP50, ScaleP99, HealP50, HealP99 time.Duration
}

// Run measures every contender at every size, Runs times.
func Run(ctx context.Context, cfg Config) ([]Measurement, error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	cluster.QuietClientLogs()
	bins, err := repo.Bin("manager", "kubectl", "kwokctl", "kube-apiserver", "etcd")
	if err != nil {
		return nil, err
	}
	if cfg.Manager != "" {
		bins["manager"] = cfg.Manager
	}
	start := time.Now()
	progress := func(format string, args ...any) {
		_, _ = fmt.Fprintf(cfg.Progress, "bench: [%s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	contenders := cfg.Contenders
	if len(contenders) == 0 {
		contenders = Contenders
	}
	for _, c := range contenders {
		if !slices.Contains(Contenders, c) {
			return nil, fmt.Errorf("unknown contender %q: want some of %s", c, strings.Join(Contenders, ", "))
		}
	}
	var out []Measurement
	var writes *operatorWrites
	for _, n := range cfg.Sizes {
		for run := 1; run <= cfg.Runs; run++ {
			for _, contender := range Contenders {
				if !slices.Contains(contenders, contender) {
					continue
				}
				progress("N=%d run %d/%d: %s ...", n, run, cfg.Runs, contender)
				m, w, err := measure(ctx, cfg, bins, contender, n, writes)
				if err != nil {
					return out, fmt.Errorf("%s at N=%d (run %d): %w", contender, n, run, err)
				}
				if w != nil {
					writes = w
				}
				m.Date = start.UTC().Format(time.DateOnly)
				progress("N=%d run %d/%d: %s converged in %v (%.1f writes/CR, %.2f ms controller CPU/CR, %.0f KiB allocated/CR, %.2f reconciles/CR, peak RSS %.0f MiB, resync %.2f writes/CR in %v; scale p99 %v, heal p99 %v)",
					n, run, cfg.Runs, contender, m.Converge.Round(time.Millisecond), m.Writes, 1000*m.CPUSeconds/float64(n), m.AllocKiB, m.Reconciles, m.PeakRSSMiB,
					m.ResyncWrites, m.ResyncTime.Round(time.Millisecond), m.ScaleP99, m.HealP99)
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// measure runs one contender on a fresh control plane. The operator's run
// also returns what it wrote, for the floors.
func measure(ctx context.Context, cfg Config, bins map[string]string, contender string, n int, writes *operatorWrites) (Measurement, *operatorWrites, error) {
	workdir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return Measurement{}, nil, err
	}
	defer func() { _ = os.RemoveAll(workdir) }()
	k, err := cluster.CreateLocal("bench", 0, workdir,
		"--disable=kube-controller-manager,kube-scheduler,kwok-controller", "--disable-qps-limits")
	if err != nil {
		return Measurement{}, nil, err
	}
	defer func() { _ = k.Delete() }()

	restCfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		return Measurement{}, nil, err
	}
	if out, err := runKubectl(bins["kubectl"], k.Kubeconfig, "apply", "--server-side", "-k", "deploy/install"); err != nil {
		return Measurement{}, nil, fmt.Errorf("install: %w\n%s", err, out)
	}
	// The floors write Memcacheds at once; before the CRD is Established,
	// discovery lists its group without the resource and every write fails.
	// (The operator waits by itself: its manager retries.)
	if out, err := runKubectl(bins["kubectl"], k.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
		return Measurement{}, nil, fmt.Errorf("install: the CRD is not Established: %w\n%s", err, out)
	}
	if out, err := runKubectl(bins["kubectl"], k.Kubeconfig, "create", "namespace", namespace); err != nil {
		return Measurement{}, nil, fmt.Errorf("namespace: %w\n%s", err, out)
	}
	timeout := max(cfg.Timeout, time.Duration(n)*60*time.Millisecond)
	cp, err := newControlPlane(k, restCfg)
	if err != nil {
		return Measurement{}, nil, err
	}

	switch contender {
	case Floor, FloorEqual:
		if writes == nil {
			return Measurement{}, nil, fmt.Errorf("the %s contender repeats the operator's writes: run the operator too", contender)
		}
		if contender == Floor {
			m, err := measureFloor(restCfg, cp, n, *writes)
			return m, nil, err
		}
		m, err := measureEqualFloor(restCfg, cp, n, *writes)
		return m, nil, err
	case Operator:
		port, err := freePort()
		if err != nil {
			return Measurement{}, nil, err
		}
		args := []string{"--kubeconfig=" + k.Kubeconfig, "--metrics-secure=false",
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--health-probe-bind-address=0"}
		var pprofURL string
		if cfg.ProfileDir != "" {
			pprofPort, err := freePort()
			if err != nil {
				return Measurement{}, nil, err
			}
			args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort))
			pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pprofPort)
		}
		startCmd := func() (*managerProcess, error) {
			return startProcess(port, nil, bins["manager"], append(args, cfg.OperatorArgs...)...)
		}
		converged := func(m *Measurement) error {
			if cfg.ProfileDir != "" {
				heap := func() ([]byte, error) { return httpProfile(pprofURL)(ctx, "heap", 0) }
				if err := saveProfile(cfg.ProfileDir, fmt.Sprintf("operator-%d-manager-heap.pprof", n), heap); err != nil {
					return err
				}
			}
			if cfg.Changes == 0 {
				return nil
			}
			l, err := measureChangeLatency(ctx, restCfg, bins["kubectl"], k.Kubeconfig, cfg.Changes)
			if err != nil {
				return fmt.Errorf("change latency: %w", err)
			}
			m.ScaleP50, m.ScaleP99 = load.Percentile(l.Scale, 50), load.Percentile(l.Scale, 99)
			m.HealP50, m.HealP99 = load.Percentile(l.Heal, 50), load.Percentile(l.Heal, 99)
			return nil
		}
		profiles := func() []<-chan error {
			return []<-chan error{
				profileCPU(ctx, cfg, n, fmt.Sprintf("operator-%d-apiserver.pprof", n), apiserverProfile(restCfg)),
				profileCPU(ctx, cfg, n, fmt.Sprintf("operator-%d-manager.pprof", n), httpProfile(pprofURL)),
			}
		}
		m, err := measureController(ctx, timeout, restCfg, cp, Operator, n, startCmd, observedCurrent, memcachedGVR, profiles, converged)
		if err != nil {
			return m, nil, err
		}
		w, err := captureWrites(ctx, restCfg)
		return m, w, err
	case Seed:
		port, err := freePort()
		if err != nil {
			return Measurement{}, nil, err
		}
		startCmd := func() (*managerProcess, error) {
			env := []string{"BENCH_SEED_KUBECONFIG=" + k.Kubeconfig, fmt.Sprintf("BENCH_SEED_METRICS=127.0.0.1:%d", port)}
			return startProcess(port, env, cfg.SeedCommand[0], cfg.SeedCommand[1:]...)
		}
		profiles := func() []<-chan error {
			return []<-chan error{profileCPU(ctx, cfg, n, fmt.Sprintf("seed-%d-apiserver.pprof", n), apiserverProfile(restCfg))}
		}
		m, err := measureController(ctx, timeout, restCfg, cp, Seed, n, startCmd, deploymentAtSize,
			appsv1.SchemeGroupVersion.WithResource("deployments"), profiles, nil)
		return m, nil, err
	}
	return Measurement{}, nil, fmt.Errorf("unknown contender %q", contender)
}

// measureController starts a controller, creates n CRs and waits until
// done holds for every object of gvr. profiles starts the CPU profiles
// wanted while it converges; converged, if set, runs once it has (before the
// figures that follow are taken). Then it restarts the controller for a
// resync.
func measureController(ctx context.Context, timeout time.Duration, restCfg *rest.Config, cp *controlPlane, contender string, n int,
	start func() (*managerProcess, error), done func(*unstructured.Unstructured) bool, gvr schema.GroupVersionResource,
	profiles func() []<-chan error, converged func(*Measurement) error) (Measurement, error) {
	m := Measurement{Contender: contender, N: n, Controller: true}
	p, err := start()
	if err != nil {
		return m, err
	}
	defer func() { _ = p.Stop() }()

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	conv, err := load.WatchConvergence(watchCtx, restCfg, gvr, namespace, n, done)
	if err != nil {
		return m, err
	}
	before, err := p.scrape()
	if err != nil {
		return m, err
	}
	cpu0, err := p.cpuSeconds()
	if err != nil {
		return m, err
	}

	profiled := profiles()
	cp0, err := cp.sample()
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	if err := createConcurrently(restCfg, n, func(c client.Client, i int) error {
		return c.Create(ctx, seedMemcached(i))
	}); err != nil {
		return m, err
	}
	select {
	case <-conv.Ready():
	case <-time.After(timeout):
		return m, fmt.Errorf("%d of %d CRs converged within %v\n%s", conv.Converged(), n, timeout, tail(p.Output()))
	}
	m.Converge = time.Since(t0)
	if err := cp.since(cp0, &m); err != nil {
		return m, err
	}
	// The high-water mark now, before the scrapes below: at N=10,000 one
	// scrape of the per-Memcached series allocates some 35 MiB, which a
	// Prometheus scraping every 30 s does not pile up but a harness polling
	// for idleness would.
	m.PeakRSSMiB, _ = p.peakRSSMiB()

	// The work counts until the controller is idle: the last CR's event may
	// still be on its way when its status shows it converged.
	after, cpu1, err := waitIdle(p, n, timeout)
	if err != nil {
		return m, err
	}
	// What one /metrics scrape allocates, now that the controller is idle:
	// the allocation counter between two scrapes in a row.
	if again, err := p.scrape(); err == nil {
		m.ScrapeKiB = (again.Sum(allocatedBytes, nil) - after.Sum(allocatedBytes, nil)) / 1024
	}
	reqs := after.Requests().Minus(before.Requests())
	m.Writes, m.Requests = reqs.Writes()/float64(n), reqs.Total()/float64(n)
	m.AllocKiB = (after.Sum(allocatedBytes, nil) - before.Sum(allocatedBytes, nil)) / 1024 / float64(n)
	m.Reconciles = (after.Reconciles() - before.Reconciles()) / float64(n)
	m.CPUSeconds = cpu1 - cpu0
	m.Errors = p.errorsLogged()
	// Only now: the profiles may outlast convergence, and waiting for them
	// must not count in the figures above.
	for _, p := range profiled {
		if err := <-p; err != nil {
			return m, err
		}
	}
	if converged != nil {
		if err := converged(&m); err != nil {
			return m, err
		}
		// Let the last change's reconcile finish (its status patch may
		// follow the Deployment's): a resync must not pick up its work.
		if _, _, err := waitIdle(p, 0, timeout); err != nil {
			return m, err
		}
	}

	// A full resync: a fresh process lists everything and reconciles every
	// CR once. A controller that is idempotent writes nothing.
	if err := p.Stop(); err != nil {
		return m, fmt.Errorf("stop: %w", err)
	}
	resyncStart := time.Now()
	p2, err := start()
	if err != nil {
		return m, err
	}
	defer func() { _ = p2.Stop() }()
	final, _, err := waitIdle(p2, n, timeout)
	if err != nil {
		return m, err
	}
	m.ResyncTime = time.Since(resyncStart)
	resync := final.Requests()
	m.ResyncWrites, m.ResyncReqs = resync.Writes()/float64(n), resync.Total()/float64(n)

	m.Errors += p2.errorsLogged()
	return m, nil
}

// allocatedBytes is the Go runtime's count of bytes allocated so far.
const allocatedBytes = "go_memstats_alloc_bytes_total"

// profileCPU takes a CPU profile with get for about the time the operator
// takes to converge n CRs, when cfg.ProfileDir is set. The returned channel
// reports when the profile is written.
func profileCPU(ctx context.Context, cfg Config, n int, file string, get func(ctx context.Context, path string, seconds int) ([]byte, error)) <-chan error {
	done := make(chan error, 1)
	if cfg.ProfileDir == "" {
		done <- nil
		return done
	}
	// About 20ms per CR for the operator on 2 cores; a profile that ends a
	// little early still shows what dominates.
	seconds := max(2, n/50)
	go func() {
		done <- saveProfile(cfg.ProfileDir, file, func() ([]byte, error) { return get(ctx, "profile", seconds) })
	}()
	return done
}

// maxAPIServerProfileSeconds keeps a profile of kube-apiserver within the
// discovery client's 32 s timeout: a longer one fails.
const maxAPIServerProfileSeconds = 30

// saveProfile writes what get returns to dir/file.
func saveProfile(dir, file string, get func() ([]byte, error)) error {
	body, err := get()
	if err != nil {
		return fmt.Errorf("profile %s: %w", file, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), body, 0o644)
}

// apiserverProfile reads kube-apiserver's /debug/pprof, served to the
// cluster admin.
func apiserverProfile(restCfg *rest.Config) func(ctx context.Context, path string, seconds int) ([]byte, error) {
	return func(ctx context.Context, path string, seconds int) ([]byte, error) {
		seconds = min(seconds, maxAPIServerProfileSeconds)
		dc, err := discovery.NewDiscoveryClientForConfig(restCfg)
		if err != nil {
			return nil, err
		}
		return dc.RESTClient().Get().AbsPath("/debug/pprof/"+path).Param("seconds", fmt.Sprint(seconds)).
			Timeout(time.Duration(seconds+60) * time.Second).DoRaw(ctx)
	}
}

// httpProfile reads a manager's /debug/pprof (--pprof-bind-address).
func httpProfile(base string) func(ctx context.Context, path string, seconds int) ([]byte, error) {
	return func(ctx context.Context, path string, seconds int) ([]byte, error) {
		url := base + "/" + path
		if seconds > 0 {
			url += fmt.Sprintf("?seconds=%d", seconds)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+60)*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
}

// waitIdle waits until a controller has reconciled at least n CRs since it
// started, and then neither reconciled nor sent a request for a second with
// an empty queue (load.WaitIdle). It returns the metrics and the process's
// CPU seconds from the start of that quiet second.
func waitIdle(p *managerProcess, n int, timeout time.Duration) (load.Metrics, float64, error) {
	m, cpu, err := load.WaitIdle(load.IdleWait{
		Scrape: p.scrape, CPUSeconds: p.cpuSeconds, MinReconciles: n,
		Quiet: time.Second, Poll: 250 * time.Millisecond, CountRequests: true,
	}, timeout)
	if err != nil {
		return nil, 0, fmt.Errorf("the controller: %w", err)
	}
	return m, cpu, nil
}

func runKubectl(kubectl, kubeconfig string, args ...string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(kubectl, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// Medians reduces runs to one Measurement per contender and size.
func Medians(ms []Measurement) []Measurement {
	type key struct {
		c string
		n int
	}
	groups := map[key][]Measurement{}
	var order []key
	for _, m := range ms {
		k := key{m.Contender, m.N}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	var out []Measurement
	for _, k := range order {
		g := groups[k]
		med := func(f func(Measurement) float64) float64 {
			vals := make([]float64, len(g))
			for i, m := range g {
				vals[i] = f(m)
			}
			slices.Sort(vals)
			return vals[len(vals)/2]
		}
		dur := func(f func(Measurement) time.Duration) time.Duration {
			return time.Duration(med(func(m Measurement) float64 { return float64(f(m)) }))
		}
		out = append(out, Measurement{
			Contender: k.c, N: k.n, Controller: g[0].Controller, Runs: len(g),
			Date:         slices.MaxFunc(g, func(a, b Measurement) int { return strings.Compare(a.Date, b.Date) }).Date,
			ScaleP50:     dur(func(m Measurement) time.Duration { return m.ScaleP50 }),
			ScaleP99:     dur(func(m Measurement) time.Duration { return m.ScaleP99 }),
			HealP50:      dur(func(m Measurement) time.Duration { return m.HealP50 }),
			HealP99:      dur(func(m Measurement) time.Duration { return m.HealP99 }),
			Converge:     time.Duration(med(func(m Measurement) float64 { return float64(m.Converge) })),
			Writes:       med(func(m Measurement) float64 { return m.Writes }),
			Requests:     med(func(m Measurement) float64 { return m.Requests }),
			CPUSeconds:   med(func(m Measurement) float64 { return m.CPUSeconds }),
			PeakRSSMiB:   med(func(m Measurement) float64 { return m.PeakRSSMiB }),
			AllocKiB:     med(func(m Measurement) float64 { return m.AllocKiB }),
			Reconciles:   med(func(m Measurement) float64 { return m.Reconciles }),
			Errors:       int(med(func(m Measurement) float64 { return float64(m.Errors) })),
			ClusterCPU:   med(func(m Measurement) float64 { return m.ClusterCPU }),
			EtcdBytes:    med(func(m Measurement) float64 { return m.EtcdBytes }),
			ScrapeKiB:    med(func(m Measurement) float64 { return m.ScrapeKiB }),
			Served:       medianByKey(g, func(m Measurement) map[string]float64 { return m.Served }),
			ResyncWrites: med(func(m Measurement) float64 { return m.ResyncWrites }),
			ResyncReqs:   med(func(m Measurement) float64 { return m.ResyncReqs }),
			ResyncTime:   time.Duration(med(func(m Measurement) float64 { return float64(m.ResyncTime) })),
		})
	}
	return out
}

// medianByKey is the median of each key's value over g (0 where a run has
// no such key).
func medianByKey(g []Measurement, f func(Measurement) map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range g {
		for k := range f(m) {
			out[k] = 0
		}
	}
	for k := range out {
		vals := make([]float64, len(g))
		for i, m := range g {
			vals[i] = f(m)[k]
		}
		slices.Sort(vals)
		out[k] = vals[len(vals)/2]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
