package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/proc"
)

// managerProcess is a controller (ours or the seed's) running as a process
// (proc, the harness's one runner), measured from outside: CPU time and
// peak RSS from /proc, requests from the client-go metrics
// controller-runtime exports, errors from its log.
type managerProcess struct {
	*proc.Process
	metrics string // http://host:port/metrics
}

// startProcess starts name with args and extra environment, and waits
// until its controller's workers run (caches synced) and it serves metrics
// on metricsPort: the clock starts at the first create, so a controller
// still starting up would be charged for its start-up.
func startProcess(metricsPort int, env []string, name string, args ...string) (*managerProcess, error) {
	p := &managerProcess{metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	output := &proc.SyncBuffer{}
	var err error
	p.Process, err = proc.TryStart(proc.Spec{
		Path: name, Args: args, Env: env, Output: output,
		Ready: func(context.Context) error {
			if !strings.Contains(output.String(), "Starting workers") {
				return errors.New("its workers have not started")
			}
			_, err := p.scrape()
			return err
		},
		ReadyTimeout: 30 * time.Second,
		StopTimeout:  30 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// errorsLogged counts the error lines of its log (JSON or console).
func (p *managerProcess) errorsLogged() int {
	n := 0
	for _, line := range strings.Split(p.Output(), "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "\tERROR\t") {
			n++
		}
	}
	return n
}

// cpuSeconds is user+system CPU time of the process so far.
func (p *managerProcess) cpuSeconds() (float64, error) {
	return proc.CPUSeconds(p.PID())
}

// clusterCPUSeconds is the CPU time of all the control plane's processes.
func clusterCPUSeconds(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		if s, err := proc.CPUSeconds(pid); err == nil {
			sum += s
		}
	}
	return sum
}

// peakRSSMiB is the high-water mark of the resident set (VmHWM).
func (p *managerProcess) peakRSSMiB() (float64, error) {
	return proc.PeakRSSMiB(p.PID())
}

func (p *managerProcess) scrape() (load.Metrics, error) { return load.Scrape(p.metrics) }
