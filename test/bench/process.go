package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/example/memcached-operator/test/internal/load"
)

// managerProcess is a controller (ours or the seed's) running as a process,
// measured from outside: CPU time and peak RSS from /proc, requests from the
// client-go metrics controller-runtime exports, errors from its log.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string // http://host:port/metrics
	mu      sync.Mutex
	errors  int
	log     strings.Builder
	done    chan error

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts name with args and extra environment, and waits
// until it serves metrics on metricsPort.
func startProcess(metricsPort int, env []string, name string, args ...string) (*managerProcess, error) {
	p := &managerProcess{cmd: exec.Command(name, args...), metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "\tERROR\t") {
				p.errors++
			}
			if p.log.Len() < 1<<20 {
				p.log.WriteString(line + "\n")
			}
			p.mu.Unlock()
		}
	}()
	go func() { err := p.cmd.Wait(); _ = pw.Close(); p.done <- err }()
	// Ready once its controller's workers run (caches synced) and it serves
	// metrics: the clock starts at the first create, so a controller still
	// starting up would be charged for its start-up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(p.output(), "Starting workers") {
			if _, err := p.scrape(); err == nil {
				return p, nil
			}
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s exited during start-up: %w\n%s", name, err, p.output())
		default:
		}
		if time.Now().After(deadline) {
			_ = p.stop()
			return nil, fmt.Errorf("%s did not start its workers and serve metrics within 30s\n%s", name, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *managerProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *managerProcess) errorsLogged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errors
}

// stop sends SIGTERM and waits for the exit; calling it again is a no-op.
func (p *managerProcess) stop() error {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case p.stopErr = <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			p.stopErr = fmt.Errorf("did not stop within 30s of SIGTERM")
		}
	})
	return p.stopErr
}

// cpuSeconds is user+system CPU time of the process so far.
func (p *managerProcess) cpuSeconds() (float64, error) {
	return load.CPUSeconds(p.cmd.Process.Pid)
}

// clusterCPUSeconds is the CPU time of all the control plane's processes.
func clusterCPUSeconds(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		if s, err := load.CPUSeconds(pid); err == nil {
			sum += s
		}
	}
	return sum
}

// peakRSSMiB is the high-water mark of the resident set (VmHWM).
func (p *managerProcess) peakRSSMiB() (float64, error) {
	return load.PeakRSSMiB(p.cmd.Process.Pid)
}

func (p *managerProcess) scrape() (load.Metrics, error) { return load.Scrape(p.metrics) }
