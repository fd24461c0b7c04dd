package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Names the shipped install uses (deploy/install): the managers run with
// exactly the manager's ClusterRole and the leader-election Role, bound to
// a ServiceAccount of their own each, so the audit log tells them apart.
const (
	operatorNamespace = "memcached-operator-system"
	managerRole       = "memcached-operator-manager-role"
	leaderRole        = "memcached-operator-leader-election-role"
	leaseName         = "memcached-operator.cache.example.com"
)

// Env is one scenario's world: a kwok cluster made from bin/ (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler, kwok's fake nodes, so the
// Deployment controller and the garbage collector are the real ones), the
// operator's install applied, and the managers a scenario starts.
type Env struct {
	Cluster  *cluster.Local
	Config   *rest.Config
	Admin    client.Client
	Progress func(format string, args ...any)

	bins    map[string]string
	workdir string
	// ownWorkdir: the workdir is a temporary directory Close removes.
	ownWorkdir bool
	mu         sync.Mutex
	managers   []*Manager
}

// EnvOptions shape the cluster.
type EnvOptions struct {
	// Pods the cluster must be able to run: fake nodes are added for them.
	Pods int
	// Audit logs every write to the operator's objects and the Lease, by
	// user, to <cluster>/logs/audit.log.
	Audit bool
	// ComponentArgs are extra flags of the control plane's components, by
	// component: {"kube-apiserver": {"max-requests-inflight=40"}}.
	ComponentArgs map[string][]string
}

// defaultComponentArgs apply to every scenario: kube-controller-manager's
// default client limit (20 requests/s) would make the Deployment
// controller, not the operator, what the figures measure.
var defaultComponentArgs = map[string][]string{"kube-controller-manager": {"kube-api-qps=500"}}

// kwokExtraArgs renders component flags as kwokctl's --extra-args. kwokctl
// v0.8.0 indexes its per-component patches by flag position, which only
// works when at most the first component has more than one flag: the
// component with the most flags goes first, and a second one with several
// is an error.
func kwokExtraArgs(byComponent ...map[string][]string) ([]string, error) {
	merged := map[string][]string{}
	var names []string
	for _, m := range byComponent {
		for c, args := range m {
			if _, ok := merged[c]; !ok {
				names = append(names, c)
			}
			merged[c] = append(merged[c], args...)
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		if len(merged[names[i]]) != len(merged[names[j]]) {
			return len(merged[names[i]]) > len(merged[names[j]])
		}
		return names[i] < names[j]
	})
	var out []string
	for i, c := range names {
		if i > 0 && len(merged[c]) > 1 {
			return nil, fmt.Errorf("kwokctl v0.8.0 takes several --extra-args for one component only; %s and %s both have several", names[0], c)
		}
		for _, a := range merged[c] {
			out = append(out, "--extra-args="+c+"="+a)
		}
	}
	return out, nil
}

var clusterSerial atomic.Int64

// podsPerNode is kwok's default node capacity (110) with room to spare.
const podsPerNode = 100

// NewEnv creates the cluster and installs the operator's CRD and RBAC.
func NewEnv(name string, opts EnvOptions, progress func(string, ...any)) (*Env, error) {
	bins, err := repo.Bin("manager", "kubectl", "kwokctl", "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")
	if err != nil {
		return nil, err
	}
	workdir, err := os.MkdirTemp("", "chaos-"+name+"-")
	if err != nil {
		return nil, err
	}
	e := &Env{bins: bins, workdir: workdir, ownWorkdir: true, Progress: progress}
	args, err := kwokExtraArgs(defaultComponentArgs, opts.ComponentArgs)
	if err != nil {
		return nil, err
	}
	if opts.Audit {
		policy := filepath.Join(workdir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--kube-audit-policy="+policy)
	}
	nodes := max(1, (opts.Pods+podsPerNode-1)/podsPerNode)
	start := time.Now()
	// Scenarios may run side by side (make test runs them in parallel).
	name = fmt.Sprintf("%s-%d", name, clusterSerial.Add(1))
	e.Cluster, err = cluster.CreateLocal(name, nodes, workdir, args...)
	if err != nil {
		_ = os.RemoveAll(workdir)
		return nil, err
	}
	e.progress("cluster %s with %d fake nodes up in %v", name, nodes, time.Since(start).Round(time.Second))
	if err := e.install(); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Env) progress(format string, args ...any) {
	if e.Progress != nil {
		e.Progress(format, args...)
	}
}

func (e *Env) install() error {
	cluster.QuietClientLogs()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Cluster.Kubeconfig)
	if err != nil {
		return err
	}
	e.Config = load.Unthrottled(cfg)
	if e.Admin, err = client.New(e.Config, client.Options{Scheme: cluster.Scheme}); err != nil {
		return err
	}
	if out, err := cluster.TryRun(e.Cluster.Kubeconfig, nil, e.bins["kubectl"], "apply", "--server-side", "-k", "deploy/install"); err != nil {
		return fmt.Errorf("install: %w\n%s", err, out)
	}
	if out, err := cluster.TryRun(e.Cluster.Kubeconfig, nil, e.bins["kubectl"], "wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
		return fmt.Errorf("CRD: %w\n%s", err, out)
	}
	ctx := context.Background()
	var subjects []rbacv1.Subject
	for _, sa := range managerAccounts {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNamespace})
		if err := e.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: operatorNamespace}}); err != nil {
			return err
		}
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-managers"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerRole}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-managers-leader-election", Namespace: operatorNamespace}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leaderRole}},
	} {
		if err := e.Admin.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// tenantConfig is the admin's config acting as an ordinary user who may
// edit Memcacheds (the shipped editor role): the apiserver's flow control
// treats its requests as a tenant's, where the admin's are exempt.
func (e *Env) tenantConfig() (*rest.Config, error) {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-tenant"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "memcached-operator-memcached-editor-role"},
	}
	if err := e.Admin.Create(context.Background(), binding); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
	return cfg, nil
}

// managerAccounts are the ServiceAccounts managers run as: two, as the prod
// overlay runs two replicas.
var managerAccounts = []string{"manager-a", "manager-b"}

// auditPolicy records every write to what the operator writes, and to the
// Lease, with the (impersonated) user who made it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - {group: apps, resources: [deployments]}
  - {group: "", resources: [services]}
  - {group: policy, resources: [poddisruptionbudgets]}
  - {group: cache.example.com, resources: [memcacheds, memcacheds/status]}
  - {group: coordination.k8s.io, resources: [leases]}
- level: None
`

// Close stops the managers and deletes the cluster.
func (e *Env) Close() error {
	e.mu.Lock()
	managers := e.managers
	e.mu.Unlock()
	var errs []error
	for _, m := range managers {
		m.stopSupervision()
		if err := m.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
		}
	}
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.Delete())
	}
	if e.ownWorkdir {
		errs = append(errs, os.RemoveAll(e.workdir))
	}
	return errors.Join(errs...)
}

// CreateNamespace creates a namespace for a batch of Memcacheds.
func (e *Env) CreateNamespace(name string) error {
	return e.Admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// Converge creates a namespace with n Memcacheds of the given size, waits
// until all have converged and the manager is idle, and keeps tracking
// them until ctx ends.
func (e *Env) Converge(ctx context.Context, m *Manager, ns string, n, size int, timeout time.Duration) (*load.Convergence, error) {
	if err := e.CreateNamespace(ns); err != nil {
		return nil, err
	}
	conv, err := e.Watch(ctx, ns, n, nil)
	if err != nil {
		return nil, err
	}
	if err := e.CreateMemcacheds(ns, "mc", 0, n, size, 16); err != nil {
		return nil, err
	}
	if err := conv.Wait(timeout); err != nil {
		return nil, err
	}
	return conv, m.waitIdle(timeout)
}

// CreateMemcacheds creates n Memcacheds of the given size, named
// <prefix>-00000..., from the given number of concurrent clients.
func (e *Env) CreateMemcacheds(namespace, prefix string, first, n, size, clients int) error {
	return load.CreateConcurrently(e.Config, clients, n, func(c client.Client, i int) error {
		return c.Create(context.Background(), load.Memcached(namespace, memcachedName(prefix, first+i), size))
	})
}

func memcachedName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// Converged is the operator's convergence as a user sees it: Ready for the
// current generation with every pod ready.
func Converged(u *unstructured.Unstructured) bool {
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	return ready == size && cluster.MemcachedCondition(u, "Ready", "True", "") == nil
}

// Watch tracks n Memcacheds of a namespace until ctx ends, with converged
// as the predicate; observe, when set, sees every version of every object.
func (e *Env) Watch(ctx context.Context, namespace string, n int, observe func(*unstructured.Unstructured)) (*load.Convergence, error) {
	return load.WatchConvergence(ctx, e.Config, load.MemcachedGVR, namespace, n, func(u *unstructured.Unstructured) bool {
		if observe != nil {
			observe(u)
		}
		return Converged(u)
	})
}

// LeaseHolder is the manager that holds the leader-election Lease, "" when
// none does.
func (e *Env) LeaseHolder(ctx context.Context) string {
	l := &coordinationv1.Lease{}
	if err := e.Admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: leaseName}, l); err != nil {
		return ""
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// WaitLeaseHolder polls the Lease until accept(holder) and returns the
// holder and when it was first seen.
func (e *Env) WaitLeaseHolder(timeout time.Duration, accept func(string) bool) (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if h := e.LeaseHolder(ctx); accept(h) {
			return h, time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, fmt.Errorf("the leader Lease did not change as expected within %v (holder %q)", timeout, e.LeaseHolder(context.Background()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StartLeader starts a manager while no other runs and waits until it
// holds the Lease, whose holder identity it returns.
func (e *Env) StartLeader(account, binary string, extraArgs ...string) (*Manager, string, error) {
	m, err := e.StartManager(account, binary, extraArgs...)
	if err != nil {
		return nil, "", err
	}
	holder, _, err := e.WaitLeaseHolder(time.Minute, func(h string) bool { return h != "" })
	return m, holder, err
}

// Manager is bin/manager (or another build of it) running as a process
// with the flags the shipped Deployment gives it: leader election on.
type Manager struct {
	*proc.Process
	Name       string
	MetricsURL string

	env  *Env
	spec proc.Spec
	// supervised: restart after an exit, as the kubelet restarts a pod's
	// container.
	mu         sync.Mutex
	supervised bool
	stopCh     chan struct{}
	exits      []string
	proxy      *apiProxy
}

// StartManager runs a manager as one of managerAccounts. binary "" means
// bin/manager.
func (e *Env) StartManager(account, binary string, extraArgs ...string) (*Manager, error) {
	if binary == "" {
		binary = e.bins["manager"]
	}
	proxy, err := newAPIProxy(e.Cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.workdir, fmt.Sprintf("kubeconfig-%s-%d", account, time.Now().UnixNano()))
	if err := proxy.writeKubeconfig(kubeconfig, operatorNamespace, account); err != nil {
		proxy.close()
		return nil, err
	}
	port := run.FreePortOrZero()
	if port == 0 {
		return nil, errors.New("no free port for the manager's metrics")
	}
	m := &Manager{Name: account, MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), env: e, proxy: proxy}
	m.spec = proc.Spec{
		Name: account,
		Path: binary,
		Args: append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect", "--leader-election-namespace=" + operatorNamespace,
			"--metrics-secure=false", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port),
			"--health-probe-bind-address=0", "--zap-devel=false"}, extraArgs...),
		Env: []string{"KUBECONFIG=" + kubeconfig},
		// Serving metrics: the manager is up, leader or standby.
		Ready: func(context.Context) error {
			_, err := load.Scrape(m.MetricsURL)
			return err
		},
		StopTimeout: 30 * time.Second,
	}
	if err := m.start(); err != nil {
		proxy.close()
		return nil, err
	}
	e.mu.Lock()
	e.managers = append(e.managers, m)
	e.mu.Unlock()
	return m, nil
}

func (m *Manager) start() error { return m.run(m.spec) }

// restart starts the process again as the kubelet restarts a container:
// without waiting for it to serve anything.
func (m *Manager) restart() error {
	spec := m.spec
	spec.Ready = nil
	return m.run(spec)
}

func (m *Manager) run(spec proc.Spec) error {
	p, err := proc.TryStart(spec)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.Process = p
	m.mu.Unlock()
	return nil
}

// current is the process running now (supervision replaces it).
func (m *Manager) current() *proc.Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Process
}

// Metrics scrapes the running process.
func (m *Manager) Metrics() (load.Metrics, error) { return load.Scrape(m.MetricsURL) }

// waitIdle waits until the manager's queue is empty and it has finished no
// reconcile for a quarter of a second.
func (m *Manager) waitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last, quietSince := -1.0, time.Now()
	for time.Now().Before(deadline) {
		s, err := m.Metrics()
		if err == nil {
			reconciles := s.Reconciles()
			depth := s.Sum("workqueue_depth", map[string]string{"name": "memcached"})
			switch {
			case reconciles != last || depth > 0:
				last, quietSince = reconciles, time.Now()
			case time.Since(quietSince) > 250*time.Millisecond:
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%s did not go idle within %v", m.Name, timeout)
}

// Stop stops the running process (SIGTERM) and any supervision.
func (m *Manager) Stop() error {
	m.stopSupervision()
	defer m.proxy.close()
	return m.current().Stop()
}

// Kill sends SIGKILL, as a node failure or the OOM killer would.
func (m *Manager) Kill() {
	m.current().Kill()
}

// Supervise restarts the manager whenever it exits, after kubelet-like
// back-off (1s doubling to 10s), until Stop.
func (m *Manager) Supervise() {
	m.mu.Lock()
	m.supervised, m.stopCh = true, make(chan struct{})
	stop := m.stopCh
	m.mu.Unlock()
	go func() {
		backoff := time.Second
		for {
			p := m.current()
			select {
			case <-stop:
				return
			case <-p.Done():
			}
			_, err := p.Exited()
			m.mu.Lock()
			m.exits = append(m.exits, fmt.Sprintf("%v: %s", err, lastLogLine(p.Output())))
			m.mu.Unlock()
			for {
				select {
				case <-stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 10*time.Second)
				if err := m.restart(); err == nil {
					break
				}
			}
		}
	}()
}

func (m *Manager) stopSupervision() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.supervised {
		close(m.stopCh)
		m.supervised = false
	}
}

// Exits lists how the supervised manager exited: the error and its last
// log line.
func (m *Manager) Exits() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.exits...)
}

func lastLogLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "error") || strings.Contains(lines[i], "lost") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// Requests is how many requests the manager sent between from and to.
func (m *Manager) Requests(from, to time.Time) int { return m.proxy.count(from, to, nil) }

// Writes is how many mutating requests (POST, PUT, PATCH, DELETE) the
// manager sent between from and to, Lease renewals excluded.
func (m *Manager) Writes(from, to time.Time) int {
	return m.proxy.count(from, to, func(r proxied) bool { return r.write && !r.lease })
}

// RequestRate is the manager's mean and highest one-second request rate
// between from and to.
func (m *Manager) RequestRate(from, to time.Time) (mean, peak float64) {
	return m.proxy.rate(from, to)
}

// Throttled is how many of the manager's requests the apiserver's flow
// control refused with 429 between from and to.
func (m *Manager) Throttled(from, to time.Time) int {
	return m.proxy.count(from, to, func(r proxied) bool { return r.code == http.StatusTooManyRequests })
}

// component is a control-plane process kwokctl started, which a scenario
// stops and starts again with the same command line, working directory and
// environment, as a static pod's restart would.
type component struct {
	name    string
	pidFile string
	args    []string
	dir     string
	env     []string
	logFile string
	stopped bool
	cmd     *exec.Cmd
	// held are listeners on the component's ports while it is stopped.
	held []net.Listener
}

// ports are the TCP ports the component listens on, from its flags.
func (c *component) ports() []int {
	var out []int
	for _, a := range c.args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			continue
		}
		switch name {
		case "secure-port":
			if p, err := strconv.Atoi(value); err == nil {
				out = append(out, p)
			}
		case "listen-client-urls", "listen-peer-urls":
			for _, u := range strings.Split(value, ",") {
				if i := strings.LastIndexByte(u, ':'); i >= 0 {
					if p, err := strconv.Atoi(u[i+1:]); err == nil {
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}

// hold binds the stopped component's ports, so that no other cluster on
// the machine (kwokctl hands out the free ports it finds) takes them before
// the component starts again. Connections are accepted and closed at once:
// to a client the component is still down.
func (c *component) hold() error {
	for _, port := range c.ports() {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			return fmt.Errorf("hold port %d of %s: %w", port, c.name, err)
		}
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		c.held = append(c.held, l)
	}
	return nil
}

// waitListening waits (up to 30s) until the restarted component has bound
// its ports, so that the creation lock is released only then.
func (c *component) waitListening(ports []int) {
	deadline := time.Now().Add(30 * time.Second)
	for _, port := range ports {
		for time.Now().Before(deadline) {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
			if err != nil {
				break // bound: by the component
			}
			_ = l.Close()
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (c *component) release() {
	for _, l := range c.held {
		_ = l.Close()
	}
	c.held = nil
}

// Component captures a running component's command line (kube-apiserver,
// etcd, ...).
func (e *Env) Component(name string) (*component, error) {
	dir := filepath.Join(e.Cluster.Workdir, "clusters", e.Cluster.Name)
	c := &component{name: name, pidFile: filepath.Join(dir, "pids", name+".pid"), logFile: filepath.Join(dir, "logs", name+".log")}
	pid, err := c.pid()
	if err != nil {
		return nil, err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	c.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if c.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return nil, err
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	c.env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	return c, nil
}

func (c *component) pid() (int, error) {
	b, err := os.ReadFile(c.pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Stop sends SIGTERM, waits for the process to end, and holds its ports.
// It does so under the machine's cluster-creation lock (hack/cluster
// takes it too): kwokctl gives a new cluster the free ports it finds, and
// a port freed for a moment must not be one of them.
func (c *component) Stop() error {
	unlock, err := buildcluster.LockCreation()
	if err != nil {
		return err
	}
	defer unlock()
	pid, err := c.pid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s: %w", c.name, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if c.cmd != nil && c.cmd.ProcessState != nil {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.stopped = true
	return c.hold()
}

// Start runs the component again, logging where it logged, and records its
// PID where kwokctl looks for it.
func (c *component) Start() error {
	unlock, err := buildcluster.LockCreation()
	if err != nil {
		return err
	}
	defer unlock()
	ports := c.ports()
	c.release()
	defer c.waitListening(ports)
	log, err := os.OpenFile(c.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.dir, c.env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	// Reaped here, so that a stopped process does not linger as a zombie
	// that the cluster's deletion would wait for.
	go func() { _ = cmd.Wait(); _ = log.Close() }()
	c.cmd, c.stopped = cmd, false
	return os.WriteFile(c.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// WaitAPIServer waits until the apiserver answers /readyz.
func (e *Env) WaitAPIServer(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return err
	}
	for {
		if _, err := dc.RESTClient().Get().AbsPath("/readyz").Timeout(2 * time.Second).DoRaw(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the apiserver is not ready after %v", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describe is what a person debugging a stuck Memcached looks at: its
// status and its Deployment's, as kubectl prints them.
func (e *Env) describe(namespace string, names []string) string {
	var b strings.Builder
	for _, name := range names {
		for _, kind := range []string{"memcached", "deployment"} {
			out, _ := cluster.TryRun(e.Cluster.Kubeconfig, nil, e.bins["kubectl"], "get", "-n", namespace, kind, name, "-o", "yaml")
			fmt.Fprintf(&b, "%s %s:\n%s\n", kind, name, out)
		}
	}
	return b.String()
}
