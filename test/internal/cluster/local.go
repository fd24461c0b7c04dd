package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Local is a kwok cluster made by scripts/cluster.sh, the same script
// `make run` uses: a real kube-apiserver, etcd, controller-manager and
// scheduler from bin/, with fake nodes on which pods go Running.
type Local struct {
	Name       string
	Kubeconfig string
	Workdir    string
	// Started is how long creating the cluster and its nodes took.
	Started time.Duration

	script string
	env    []string
}

// StartLocal creates a cluster with the given number of fake nodes and
// deletes it when the test ends, failed or not, checking that none of its
// processes survive.
func StartLocal(t testing.TB, name string, nodes int, kwokArgs ...string) *Local {
	t.Helper()
	l, err := CreateLocal(name, nodes, t.TempDir(), kwokArgs...)
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

// CreateLocal runs `scripts/cluster.sh up` with its state under workdir.
// The caller deletes the cluster with Delete.
func CreateLocal(name string, nodes int, workdir string, kwokArgs ...string) (*Local, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	l := &Local{
		Name: name, Kubeconfig: filepath.Join(workdir, "kubeconfig"), Workdir: filepath.Join(workdir, "kwok"),
		script: filepath.Join(root, "scripts", "cluster.sh"),
	}
	l.env = append(os.Environ(),
		"CLUSTER_NAME="+name, "KWOK_WORKDIR="+l.Workdir, "CLUSTER_KUBECONFIG="+l.Kubeconfig,
		"NODES="+strconv.Itoa(nodes), "KWOK_ARGS="+strings.Join(kwokArgs, " "))

	start := time.Now()
	up := exec.Command(l.script, "up")
	up.Env = l.env
	if out, err := up.CombinedOutput(); err != nil {
		_ = l.Delete()
		return nil, fmt.Errorf("scripts/cluster.sh up: %w\n%s", err, out)
	}
	l.Started = time.Since(start)
	return l, nil
}

// Delete removes the cluster and its files, and makes sure none of its
// processes survive.
func (l *Local) Delete() error {
	pids := l.PIDs()
	down := exec.Command(l.script, "down")
	down.Env = l.env
	var errs []error
	if out, err := down.CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("scripts/cluster.sh down: %w\n%s", err, out))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
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

// PIDs are the cluster's component processes, from kwokctl's pid files.
func (l *Local) PIDs() []int {
	files, _ := filepath.Glob(filepath.Join(l.Workdir, "clusters", l.Name, "pids", "*.pid"))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

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
