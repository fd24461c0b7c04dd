package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/test/internal/proc"
)

// The control plane's own processes, stopped and started again as an
// outage would, with their ports held while they are down.

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
	cmd, err := proc.Command(pid)
	if err != nil {
		return nil, err
	}
	c.args, c.dir, c.env = cmd.Args, cmd.Dir, cmd.Env
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
