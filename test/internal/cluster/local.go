package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Local is a local cluster made by hack/cluster, the package `make
// cluster-up` and `make run` use: a real kube-apiserver, etcd,
// controller-manager and scheduler from bin/, with kwok's fake nodes (on
// which pods go Running without running) or real nodes (kubelet,
// containerd, runc: pods run).
type Local struct {
	Name       string
	Kubeconfig string
	Workdir    string
	// Started is how long creating the cluster and its nodes took.
	Started time.Duration
	// Cluster is the cluster itself: its real nodes, network and images.
	Cluster *buildcluster.Cluster
}

// StartLocal creates a cluster with the given number of fake nodes and
// deletes it when the test ends, failed or not, checking that none of its
// processes survive.
func StartLocal(t testing.TB, name string, nodes int, kwokArgs ...string) *Local {
	t.Helper()
	return start(t, buildcluster.Options{Name: name, FakeNodes: nodes, KwokArgs: kwokArgs})
}

// StartReal creates a cluster with real nodes (as many as the scenario
// needs) and deletes it when the test ends, undoing what its nodes changed
// on the machine. A machine that cannot run real nodes fails the test with
// what it lacks: the tier never skips.
func StartReal(t testing.TB, name string, nodes int) *Local {
	t.Helper()
	return start(t, buildcluster.Options{Name: name, RealNodes: nodes})
}

// StartRealPulling is StartReal for a cluster whose nodes pull from a
// registry, as a user's cluster pulls a release: at the host's end of
// the cluster's fabric (Registry), over plain HTTP, with only the
// cluster's own images (the sandbox's and CoreDNS's) imported. The caller
// serves the registry there (registry.StartAt).
func StartRealPulling(t testing.TB, name string, nodes int) *Local {
	t.Helper()
	return start(t, buildcluster.Options{Name: name, RealNodes: nodes, RegistryPort: run.FreePort(t)})
}

// Registry is the address its nodes pull from (StartRealPulling).
func (l *Local) Registry() string { return l.Cluster.Registry() }

func start(t testing.TB, o buildcluster.Options) *Local {
	t.Helper()
	l, err := create(o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Delete(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// CreateLocal creates a cluster with fake nodes and its state under
// workdir. The caller deletes it with Delete.
func CreateLocal(name string, nodes int, workdir string, kwokArgs ...string) (*Local, error) {
	return create(buildcluster.Options{Name: name, FakeNodes: nodes, KwokArgs: kwokArgs}, workdir)
}

// CreateReal creates a cluster with real nodes and its state under
// workdir. The caller deletes it with Delete.
func CreateReal(name string, nodes int, workdir string) (*Local, error) {
	return create(buildcluster.Options{Name: name, RealNodes: nodes}, workdir)
}

func create(o buildcluster.Options, workdir string) (*Local, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	o.Repo, o.Kubeconfig, o.Workdir = root, filepath.Join(workdir, "kubeconfig"), filepath.Join(workdir, "kwok")
	l := &Local{Name: o.Name, Kubeconfig: o.Kubeconfig, Workdir: o.Workdir, Cluster: buildcluster.New(o)}
	begin := time.Now()
	if err := l.Cluster.Up(context.Background()); err != nil {
		return nil, errors.Join(err, l.Delete())
	}
	l.Started = time.Since(begin)
	return l, nil
}

// Delete removes the cluster and its files, and makes sure none of its
// processes survive.
func (l *Local) Delete() error {
	pids := l.PIDs()
	var errs []error
	if err := l.Cluster.Down(context.Background()); err != nil {
		errs = append(errs, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for buildcluster.Alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				errs = append(errs, fmt.Errorf("process %d of cluster %s survived its deletion", pid, l.Name))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// PIDs are the cluster's own processes: its control plane's and its real
// nodes'.
func (l *Local) PIDs() []int { return l.Cluster.PIDs() }

// DumpOnFailure prints what a person debugging a failed run would look at:
// objects, events, and the tail of every component log.
func (l *Local) DumpOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		kubectl, err := repo.Bin("kubectl")
		if err != nil {
			return
		}
		for _, args := range [][]string{
			{"get", "nodes,all,memcached,pdb", "-A", "-o", "wide"},
			{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		} {
			out, _ := TryRun(l.Kubeconfig, nil, kubectl["kubectl"], args...)
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		}
		logs, _ := filepath.Glob(filepath.Join(l.Workdir, "clusters", l.Name, "logs", "*.log"))
		nodeLogs, _ := filepath.Glob(filepath.Join(l.Cluster.NodesDir(), "*", "logs", "*.log"))
		logs = append(logs, nodeLogs...)
		for _, f := range logs {
			lines := strings.Split(strings.TrimSpace(run.ReadFile(t, f)), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			t.Logf("%s (last lines):\n%s", filepath.Base(f), strings.Join(lines, "\n"))
		}
	})
}

// Client is a controller-runtime client of the cluster, as its admin.
func (l *Local) Client(t testing.TB) client.Client {
	t.Helper()
	QuietClientLogs()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// String is for logs.
func (l *Local) String() string { return fmt.Sprintf("cluster %s (%s)", l.Name, l.Kubeconfig) }
