package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/run"
)

// The operator under test: bin/manager run as processes, supervised as a
// kubelet would, its requests counted by the proxy in front of it.

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
	if err := proxy.writeKubeconfig(kubeconfig, names.OperatorNamespace, account); err != nil {
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
		Args: append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect", "--leader-election-namespace=" + names.OperatorNamespace,
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
// reconcile for a quarter of a second (load.WaitIdle).
func (m *Manager) waitIdle(timeout time.Duration) error {
	if _, _, err := load.WaitIdle(load.IdleWait{Scrape: m.Metrics, Quiet: 250 * time.Millisecond, Poll: 25 * time.Millisecond}, timeout); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	return nil
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
