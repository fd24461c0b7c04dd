package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
)

// Names the shipped install uses (deploy/install): the managers run with
// exactly the manager's ClusterRole and the leader-election Role, bound to
// a ServiceAccount of their own each, so the audit log tells them apart.
const (
	leaderRole = "memcached-operator-leader-election-role"
	leaseName  = "memcached-operator.cache.example.com"
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
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: names.OperatorNamespace})
		if err := e.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: names.OperatorNamespace}}); err != nil {
			return err
		}
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-managers"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: names.ManagerRole}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-managers-leader-election", Namespace: names.OperatorNamespace}, Subjects: subjects,
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
	if err := e.Admin.Get(ctx, types.NamespacedName{Namespace: names.OperatorNamespace, Name: leaseName}, l); err != nil {
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
