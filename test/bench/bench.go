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
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/repo"
)

// Contenders, in the order they run.
const (
	Operator = "operator" // bin/manager, default flags
	Floor    = "floor"    // the operator's objects created directly, no controller
	Seed     = "seed"     // the tutorial's reconciler
)

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
	// ProfileDir, when set, receives a CPU profile of kube-apiserver taken
	// while each controller converges (<contender>-<N>-apiserver.pprof):
	// on a shared 2-core machine the apiserver is where the time goes.
	ProfileDir string
}

// Measurement is one contender's run at one size.
type Measurement struct {
	Contender     string
	N             int
	Converge      time.Duration
	Writes        float64 // per CR
	Requests      float64 // per CR
	CPUSeconds    float64
	PeakRSSMiB    float64
	Errors        int
	ClusterCPU    float64 // kube-apiserver + etcd CPU seconds while converging
	ResyncWrites  float64 // per CR
	ResyncReqs    float64 // per CR
	ResyncTime    time.Duration
	measuredByCPU bool
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
	start := time.Now()
	progress := func(format string, args ...any) {
		_, _ = fmt.Fprintf(cfg.Progress, "bench: [%s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	var out []Measurement
	var templates *ownedTemplates
	for _, n := range cfg.Sizes {
		for run := 1; run <= cfg.Runs; run++ {
			for _, contender := range []string{Operator, Floor, Seed} {
				progress("N=%d run %d/%d: %s ...", n, run, cfg.Runs, contender)
				m, tmpl, err := measure(ctx, cfg, bins, contender, n, templates)
				if err != nil {
					return out, fmt.Errorf("%s at N=%d (run %d): %w", contender, n, run, err)
				}
				if tmpl != nil && templates == nil {
					templates = tmpl
				}
				progress("N=%d run %d/%d: %s converged in %v (%.1f writes/CR, resync %.2f writes/CR)",
					n, run, cfg.Runs, contender, m.Converge.Round(time.Millisecond), m.Writes, m.ResyncWrites)
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// measure runs one contender on a fresh control plane.
func measure(ctx context.Context, cfg Config, bins map[string]string, contender string, n int, templates *ownedTemplates) (Measurement, *ownedTemplates, error) {
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
	if out, err := runKubectl(bins["kubectl"], k.Kubeconfig, "create", "namespace", namespace); err != nil {
		return Measurement{}, nil, fmt.Errorf("namespace: %w\n%s", err, out)
	}

	switch contender {
	case Floor:
		if templates == nil {
			return Measurement{}, nil, errors.New("the floor needs the operator's objects: run the operator first")
		}
		m, err := measureFloor(restCfg, k.PIDs(), n, *templates)
		return m, nil, err
	case Operator:
		port, err := freePort()
		if err != nil {
			return Measurement{}, nil, err
		}
		startCmd := func() (*managerProcess, error) {
			return startProcess(port, nil, bins["manager"], append([]string{"--kubeconfig=" + k.Kubeconfig,
				"--metrics-secure=false", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port),
				"--health-probe-bind-address=0"}, cfg.OperatorArgs...)...)
		}
		m, err := measureController(ctx, cfg, restCfg, k.PIDs(), Operator, n, startCmd, observedCurrent, memcachedGVR)
		if err != nil {
			return m, nil, err
		}
		tmpl, err := captureTemplates(restCfg)
		return m, tmpl, err
	case Seed:
		port, err := freePort()
		if err != nil {
			return Measurement{}, nil, err
		}
		startCmd := func() (*managerProcess, error) {
			env := []string{"BENCH_SEED_KUBECONFIG=" + k.Kubeconfig, fmt.Sprintf("BENCH_SEED_METRICS=127.0.0.1:%d", port)}
			return startProcess(port, env, cfg.SeedCommand[0], cfg.SeedCommand[1:]...)
		}
		m, err := measureController(ctx, cfg, restCfg, k.PIDs(), Seed, n, startCmd, deploymentAtSize,
			appsv1.SchemeGroupVersion.WithResource("deployments"))
		return m, nil, err
	}
	return Measurement{}, nil, fmt.Errorf("unknown contender %q", contender)
}

func measureController(ctx context.Context, cfg Config, restCfg *rest.Config, clusterPIDs []int, contender string, n int,
	start func() (*managerProcess, error), done func(*unstructured.Unstructured) bool, gvr schema.GroupVersionResource) (Measurement, error) {
	m := Measurement{Contender: contender, N: n, measuredByCPU: true}
	p, err := start()
	if err != nil {
		return m, err
	}
	defer func() { _ = p.stop() }()

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

	profiled := profileAPIServer(ctx, cfg, restCfg, contender, n)
	clusterCPU0 := clusterCPUSeconds(clusterPIDs)
	t0 := time.Now()
	if err := createConcurrently(restCfg, n, func(c client.Client, i int) error {
		return c.Create(ctx, seedMemcached(i))
	}); err != nil {
		return m, err
	}
	select {
	case <-conv.Ready():
	case <-time.After(cfg.Timeout):
		return m, fmt.Errorf("%d of %d CRs converged within %v\n%s", conv.Converged(), n, cfg.Timeout, tail(p.output()))
	}
	m.Converge = time.Since(t0)
	m.ClusterCPU = clusterCPUSeconds(clusterPIDs) - clusterCPU0

	after, err := p.scrape()
	if err != nil {
		return m, err
	}
	reqs := after.Requests().Minus(before.Requests())
	m.Writes, m.Requests = reqs.Writes()/float64(n), reqs.Total()/float64(n)
	cpu1, _ := p.cpuSeconds()
	m.CPUSeconds = cpu1 - cpu0
	m.PeakRSSMiB, _ = p.peakRSSMiB()
	m.Errors = p.errorsLogged()
	// Only now: the profile may outlast convergence, and waiting for it
	// must not count in the figures above.
	if err := <-profiled; err != nil {
		return m, err
	}

	// A full resync: a fresh process lists everything and reconciles every
	// CR once. A controller that is idempotent writes nothing.
	if err := p.stop(); err != nil {
		return m, fmt.Errorf("stop: %w", err)
	}
	resyncStart := time.Now()
	p2, err := start()
	if err != nil {
		return m, err
	}
	defer func() { _ = p2.stop() }()
	final, err := waitIdle(p2, n, cfg.Timeout)
	if err != nil {
		return m, err
	}
	m.ResyncTime = time.Since(resyncStart)
	resync := final.Requests()
	m.ResyncWrites, m.ResyncReqs = resync.Writes()/float64(n), resync.Total()/float64(n)
	m.Errors += p2.errorsLogged()
	return m, nil
}

// profileAPIServer starts a CPU profile of kube-apiserver (its
// /debug/pprof, served to the cluster admin) for the expected convergence
// time, when cfg.ProfileDir is set. The returned channel reports when the
// profile is written.
func profileAPIServer(ctx context.Context, cfg Config, restCfg *rest.Config, contender string, n int) <-chan error {
	done := make(chan error, 1)
	if cfg.ProfileDir == "" {
		done <- nil
		return done
	}
	// About 20ms per CR for the operator on 2 cores; a profile that ends a
	// little early still shows what dominates.
	seconds := max(2, n/50)
	go func() {
		dc, err := discovery.NewDiscoveryClientForConfig(restCfg)
		if err != nil {
			done <- err
			return
		}
		body, err := dc.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(seconds)).
			Timeout(time.Duration(seconds+60) * time.Second).DoRaw(ctx)
		if err != nil {
			done <- fmt.Errorf("apiserver profile: %w", err)
			return
		}
		path := filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d-apiserver.pprof", contender, n))
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			done <- err
			return
		}
		done <- os.WriteFile(path, body, 0o644)
	}()
	return done
}

// waitIdle waits until a restarted controller has reconciled every CR and
// its queue has stayed empty for a second, and returns its metrics then.
func waitIdle(p *managerProcess, n int, timeout time.Duration) (load.Metrics, error) {
	deadline := time.Now().Add(timeout)
	var last float64 = -1
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		s, err := p.scrape()
		if err == nil {
			reconciles := s.Reconciles()
			depth := s.Sum("workqueue_depth", map[string]string{"name": "memcached"})
			if reconciles != last || depth > 0 {
				last, stableSince = reconciles, time.Now()
			} else if reconciles >= float64(n) && time.Since(stableSince) > time.Second {
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("the restarted controller did not reconcile %d CRs within %v", n, timeout)
}

func measureFloor(restCfg *rest.Config, clusterPIDs []int, n int, t ownedTemplates) (Measurement, error) {
	ctx := context.Background()
	cpu0 := clusterCPUSeconds(clusterPIDs)
	t0 := time.Now()
	err := createConcurrently(restCfg, n, func(c client.Client, i int) error {
		for _, o := range t.instantiate(i) {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
	converge := time.Since(t0)
	return Measurement{Contender: Floor, N: n, Converge: converge, Writes: 3, Requests: 3,
		ClusterCPU: clusterCPUSeconds(clusterPIDs) - cpu0}, err
}

// captureTemplates reads what the operator created for the first CR.
func captureTemplates(restCfg *rest.Config) (*ownedTemplates, error) {
	c, err := client.New(restCfg, client.Options{Scheme: cluster.Scheme})
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: namespace, Name: "mc-00000"}
	t := &ownedTemplates{deployment: &appsv1.Deployment{}, service: &corev1.Service{}, pdb: &policyv1.PodDisruptionBudget{}}
	for _, o := range []client.Object{t.deployment, t.service, t.pdb} {
		if err := c.Get(context.Background(), key, o); err != nil {
			return nil, fmt.Errorf("read the operator's objects: %w", err)
		}
	}
	t.deployment.Status = appsv1.DeploymentStatus{}
	t.service.Spec.ClusterIPs, t.service.Spec.ClusterIP = nil, corev1.ClusterIPNone
	t.service.Status = corev1.ServiceStatus{}
	t.pdb.(*policyv1.PodDisruptionBudget).Status = policyv1.PodDisruptionBudgetStatus{}
	// Verify the operator created one of each per CR.
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}} {
		if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
	}
	return t, nil
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
		out = append(out, Measurement{
			Contender: k.c, N: k.n, measuredByCPU: g[0].measuredByCPU,
			Converge:     time.Duration(med(func(m Measurement) float64 { return float64(m.Converge) })),
			Writes:       med(func(m Measurement) float64 { return m.Writes }),
			Requests:     med(func(m Measurement) float64 { return m.Requests }),
			CPUSeconds:   med(func(m Measurement) float64 { return m.CPUSeconds }),
			PeakRSSMiB:   med(func(m Measurement) float64 { return m.PeakRSSMiB }),
			Errors:       int(med(func(m Measurement) float64 { return float64(m.Errors) })),
			ClusterCPU:   med(func(m Measurement) float64 { return m.ClusterCPU }),
			ResyncWrites: med(func(m Measurement) float64 { return m.ResyncWrites }),
			ResyncReqs:   med(func(m Measurement) float64 { return m.ResyncReqs }),
			ResyncTime:   time.Duration(med(func(m Measurement) float64 { return float64(m.ResyncTime) })),
		})
	}
	return out
}
