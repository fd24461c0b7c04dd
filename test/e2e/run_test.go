package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// makeRun is `make run` as a newcomer starts it (proc, the harness's one
// runner): in its own process group (the terminal's), so Ctrl-C reaches
// make and the manager alike, with the user's environment.
type makeRun struct {
	*proc.Process
	// seen is how much of the output earlier waits consumed.
	seen int
}

func startMakeRun(t *testing.T, env []string, args ...string) *makeRun {
	t.Helper()
	p, err := proc.TryStart(proc.Spec{
		Name: "make run", Path: "make",
		Args: append([]string{"--no-print-directory", "-C", repo.MustRoot(t), "run"}, args...),
		Env:  append(run.UserEnv(), env...), OnlyEnv: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if exited, _ := p.Exited(); !exited {
			p.Kill()
			t.Logf("make run killed at cleanup")
		}
		if t.Failed() {
			t.Logf("make run output:\n%s", p.Output())
		}
	})
	return &makeRun{Process: p}
}

// waitFor waits for output containing s after what earlier waits matched,
// failing if make exits first.
func (m *makeRun) waitFor(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := m.Output()
		if i := strings.Index(out[m.seen:], s); i >= 0 {
			m.seen += i + len(s)
			return
		}
		if exited, err := m.Exited(); exited {
			t.Fatalf("make run exited (%v) before printing %q", err, s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("make run did not print %q within %v", s, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// interrupt is Ctrl-C: SIGINT to the whole process group. make itself
// then exits by the signal, as it does in a terminal ("Interrupt"); what
// matters is that the manager stopped cleanly, which the caller checks.
func (m *makeRun) interrupt(t *testing.T) error {
	t.Helper()
	if err := m.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := m.Wait(30 * time.Second)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT {
		return nil
	}
	return err
}

// `make run` on a machine with no cluster: it creates one, installs the
// operator, applies the tutorial's Memcached, runs the manager in the
// foreground and reports 3/3 Ready; Ctrl-C stops it cleanly; a second
// `make run` reuses the cluster; `make cluster-down` removes it.
func TestMakeRun(t *testing.T) {
	work := t.TempDir()
	env := []string{
		"CLUSTER_NAME=e2e-run",
		"KWOK_WORKDIR=" + filepath.Join(work, "kwok"),
		"CLUSTER_KUBECONFIG=" + filepath.Join(work, "kubeconfig"),
		fmt.Sprintf("METRICS_ADDR=127.0.0.1:%d", run.FreePort(t)),
		fmt.Sprintf("PROBE_ADDR=127.0.0.1:%d", run.FreePort(t)),
	}
	t.Cleanup(func() { makeTarget(t, env, "cluster-down") })

	first := startMakeRun(t, env)
	first.waitFor(t, `created cluster "e2e-run"`, 120*time.Second)
	// As root on Linux with the packages installable (CI), make run uses
	// real nodes.
	first.waitFor(t, "3 real nodes Ready", 120*time.Second)
	first.waitFor(t, "memcached-sample is 3/3 Ready", 120*time.Second)
	first.waitFor(t, "bin/kubectl scale memcached/memcached-sample --replicas=5", 10*time.Second)
	if err := first.interrupt(t); err != nil {
		t.Errorf("make run after Ctrl-C: %v (want a clean exit)", err)
	}
	if out := first.Output(); !strings.Contains(out, "Wait completed, proceeding to shutdown the manager") || strings.Contains(out, "manager exited") {
		t.Errorf("the manager did not shut down cleanly")
	}

	second := startMakeRun(t, env)
	second.waitFor(t, `reusing cluster "e2e-run"`, 60*time.Second)
	second.waitFor(t, "memcached-sample is 3/3 Ready", 60*time.Second)
	if err := second.interrupt(t); err != nil {
		t.Errorf("second make run after Ctrl-C: %v", err)
	}

	// CLUSTER=current uses whatever $KUBECONFIG points at; its nodes
	// cannot pull the production images, so the run is given the images
	// they hold, in the form `bin/cluster images` prints them (else the
	// manager would roll the cache to images no node can pull).
	images, code := clusterScript(t, env, "images")
	if code != 0 {
		t.Fatalf("bin/cluster images: %s", images)
	}
	currentEnv := append(slices.Clone(env), "KUBECONFIG="+filepath.Join(work, "kubeconfig"))
	for _, line := range strings.Fields(images) {
		if strings.HasPrefix(line, "MEMCACHED_IMAGE=") || strings.HasPrefix(line, "EXPORTER_IMAGE=") {
			currentEnv = append(currentEnv, line)
		}
	}
	current := startMakeRun(t, currentEnv, "CLUSTER=current")
	current.waitFor(t, "using the current cluster", 60*time.Second)
	current.waitFor(t, "memcached-sample is 3/3 Ready", 60*time.Second)
	if err := current.interrupt(t); err != nil {
		t.Errorf("make run CLUSTER=current after Ctrl-C: %v", err)
	}
	if strings.Contains(current.Output(), "creating cluster") || strings.Contains(current.Output(), "reusing cluster") {
		t.Errorf("CLUSTER=current touched the local cluster:\n%s", current.Output())
	}

	out := makeTarget(t, env, "cluster-down")
	if !strings.Contains(out, `deleted cluster "e2e-run"`) {
		t.Errorf("make cluster-down: %s", out)
	}
	if _, err := os.Stat(filepath.Join(work, "kwok", "clusters", "e2e-run")); !os.IsNotExist(err) {
		t.Errorf("make cluster-down left the cluster directory: %v", err)
	}
}

// The errors a newcomer hits come with the fix.
func TestMakeRunErrors(t *testing.T) {
	t.Run("port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		m := startMakeRun(t, []string{"METRICS_ADDR=127.0.0.1:" + port, "CLUSTER_NAME=never-created"})
		if err := m.Wait(2 * time.Minute); err == nil {
			t.Fatal("make run started with its metrics port taken")
		}
		if out := m.Output(); !strings.Contains(out, "port "+port+" is in use") || !strings.Contains(out, "METRICS_ADDR=") {
			t.Errorf("no clear message for a taken port:\n%s", out)
		}
	})

	t.Run("binaries missing", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.CopyFS(filepath.Join(dir, "scripts"), os.DirFS(filepath.Join(repo.MustRoot(t), "scripts"))); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "scripts", "run.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run.Command(t, nil, filepath.Join(dir, "scripts", "run.sh"))
		if code == 0 || !strings.Contains(out+errOut, "run 'make tools build'") {
			t.Errorf("run.sh without binaries: exit %d\n%s%s", code, out, errOut)
		}
		cmd := exec.Command(filepath.Join(repo.MustRoot(t), "bin", "cluster"), "up")
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(b), "run 'make tools'") {
			t.Errorf("bin/cluster up in a checkout without tools: %v\n%s", err, b)
		}
	})

	// kube-apiserver exits at start when its port is taken; kwokctl would
	// wait out its --wait. The failure comes at once, with the component's
	// own log line.
	t.Run("apiserver port taken", func(t *testing.T) {
		l, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		out, _ := failedClusterUp(t, "taken", "--kube-apiserver-port="+port)
		if !strings.Contains(out, "kube-apiserver exited while the cluster started") || !strings.Contains(out, "address already in use") {
			t.Errorf("the failure does not name kube-apiserver and its log line:\n%s", out)
		}
	})

	// A controller manager that exits at start is started again, and one
	// that keeps exiting fails the cluster with its own log line,
	// instead of a cluster where no Deployment rolls out.
	t.Run("controller manager exits", func(t *testing.T) {
		// --wait: kwokctl waits this long for the component before
		// bin/cluster looks (its own 180 s otherwise).
		out, _ := failedClusterUp(t, "no-kcm", "--extra-args=kube-controller-manager=no-such-flag=1 --wait=10s")
		if !strings.Contains(out, "kube-controller-manager exited while the cluster started") || !strings.Contains(out, "kube-controller-manager exited again after 3 restarts") ||
			!strings.Contains(out, "no-such-flag") {
			t.Errorf("the failure does not say kube-controller-manager was restarted and why it exits:\n%s", out)
		}
	})

	t.Run("kwokctl fails", func(t *testing.T) {
		out, work := failedClusterUp(t, "broken", "--no-such-flag")
		if !strings.Contains(out, "kwokctl create cluster:") || !strings.Contains(out, filepath.Join(work, "kwokctl-broken.log")) {
			t.Errorf("the failure does not point at kwokctl's log:\n%s", out)
		}
	})
}

// failedClusterUp runs bin/cluster up for a new cluster with more kwokctl
// flags, expects it to fail, and returns its output and work directory.
func failedClusterUp(t *testing.T, name, kwokArgs string) (out, work string) {
	t.Helper()
	work = t.TempDir()
	env := []string{"CLUSTER_NAME=" + name, "KWOK_WORKDIR=" + work, "CLUSTER_KUBECONFIG=" + filepath.Join(work, "kubeconfig"), "KWOK_ARGS=" + kwokArgs}
	out, code := clusterScript(t, env, "up")
	t.Cleanup(func() { clusterScript(t, env, "down") })
	if code == 0 {
		t.Fatalf("bin/cluster up with KWOK_ARGS=%s succeeded:\n%s", kwokArgs, out)
	}
	return out, work
}

func clusterScript(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo.MustRoot(t), "bin", "cluster"), args...)
	cmd.Dir = repo.MustRoot(t)
	cmd.Env = append(run.UserEnv(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	return string(out), code
}

func makeTarget(t *testing.T, env []string, target string) string {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-C", repo.MustRoot(t), target)
	cmd.Env = append(run.UserEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("make %s: %v\n%s", target, err, out)
	}
	return string(out)
}
