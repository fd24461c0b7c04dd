package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	return processCPUSeconds(p.cmd.Process.Pid)
}

// clusterCPUSeconds is the CPU time of all the control plane's processes.
func clusterCPUSeconds(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		if s, err := processCPUSeconds(pid); err == nil {
			sum += s
		}
	}
	return sum
}

func processCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// peakRSSMiB is the high-water mark of the resident set (VmHWM).
func (p *managerProcess) peakRSSMiB() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}

// requestCounts are the process's requests to the apiserver by HTTP method,
// from client-go's rest_client_requests_total.
type requestCounts map[string]float64

func (r requestCounts) total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// writes are the mutating requests (POST, PUT, PATCH, DELETE).
func (r requestCounts) writes() float64 {
	return r["POST"] + r["PUT"] + r["PATCH"] + r["DELETE"]
}

func (r requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range r {
		out[k] = v - before[k]
	}
	return out
}

type scraped map[string]*dto.MetricFamily

func (p *managerProcess) scrape() (scraped, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func (s scraped) requests() requestCounts {
	out := requestCounts{}
	if f := s["rest_client_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			out[label(m, "method")] += m.GetCounter().GetValue()
		}
	}
	return out
}

// sum adds up a counter or gauge family whose labels include the given ones.
func (s scraped) sum(name string, labels map[string]string) float64 {
	var n float64
	f := s[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			if label(m, k) != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			n += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			n += m.GetGauge().GetValue()
		}
	}
	return n
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
