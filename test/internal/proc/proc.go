// Package proc runs real programs as test fixtures: memcached, its
// exporter, the manager, a registry, Flux's controllers. A fixture starts
// the binary, waits until it is ready, keeps its output for assertions and
// prints it when the test fails, and stops it (SIGTERM, then SIGKILL) when
// the test ends. Written once, so that every fixture behaves the same.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Spec describes a program to run.
type Spec struct {
	// Name appears in logs and errors.
	Name string
	Path string
	Args []string
	// Env is added to this process's environment, or, with OnlyEnv, is
	// the whole environment (a newcomer's shell: run.UserEnv).
	Env     []string
	OnlyEnv bool
	Dir     string
	// Credential runs the program as another user (only root can).
	Credential *syscall.Credential
	// Ready is polled until it returns nil; nil means ready once started.
	Ready func(ctx context.Context) error
	// Output, when set, collects the program's output, for a Ready that
	// waits for a log line.
	Output *SyncBuffer
	// ReadyTimeout bounds the wait (default 30s).
	ReadyTimeout time.Duration
	// StopTimeout is how long SIGTERM has before SIGKILL (default 10s).
	StopTimeout time.Duration
	// StopSignal replaces SIGTERM, for programs whose orderly exit only
	// costs time (memcached takes up to a second to notice SIGTERM).
	StopSignal syscall.Signal
}

// Process is a running program.
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	out     *SyncBuffer
	done    chan struct{}
	waitErr error
	started time.Time
}

// Start runs the program until the test ends and waits until it is ready.
// Failing to start or to get ready fails the test with the program's output.
func Start(t testing.TB, s Spec) *Process {
	t.Helper()
	p, err := TryStart(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", s.Name, tail(p.Output(), 60))
		}
	})
	return p
}

// TryStart is Start for callers that count failures instead of failing:
// the error carries the program's output. The caller stops the process.
func TryStart(s Spec) (*Process, error) {
	if s.Name == "" {
		s.Name = filepath.Base(s.Path)
	}
	p := &Process{spec: s, out: s.Output, done: make(chan struct{}), started: time.Now()}
	if p.out == nil {
		p.out = &SyncBuffer{}
	}
	p.cmd = exec.Command(s.Path, s.Args...)
	p.cmd.Env = append(os.Environ(), s.Env...)
	if s.OnlyEnv {
		p.cmd.Env = s.Env
	}
	p.cmd.Dir = s.Dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Its own process group, so that stopping it reaches its children too.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.Credential}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("%s (%s %s): %w\noutput:\n%s", s.Name, s.Path, strings.Join(s.Args, " "), err, tail(p.Output(), 40))
	}
	return p, nil
}

func (p *Process) waitReady() error {
	timeout := p.spec.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready: %w", p.waitErr)
		default:
		}
		if p.spec.Ready == nil {
			return nil
		}
		err := p.spec.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		case <-p.done:
			return fmt.Errorf("exited before it was ready: %w", p.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM (or StopSignal) to the process group, then SIGKILL
// after StopTimeout. An exit caused by the signal is not an error.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	sig := p.spec.StopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	timeout := p.spec.StopTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("did not stop within %v of SIGTERM; killed", timeout)
	}
}

// Signal sends sig to the process group, as a terminal's Ctrl-C
// (SIGINT) reaches every program of a foreground job.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Wait waits up to timeout for the process to end and returns how it
// ended (the *exec.ExitError of a failure or a signal).
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		_, err := p.Exited()
		return err
	case <-time.After(timeout):
		return fmt.Errorf("%s still runs after %v", p.spec.Name, timeout)
	}
}

// Kill sends SIGKILL, as a crash or the OOM killer would.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		var exit *exec.ExitError
		if errors.As(p.waitErr, &exit) {
			return true, exit
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed when the process ends.
func (p *Process) Done() <-chan struct{} { return p.done }

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Tail is the last lines the process printed, for a failure's message.
func (p *Process) Tail(lines int) string { return tail(p.Output(), lines) }

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = append([]string{fmt.Sprintf("... (%d lines before)", len(all)-lines)}, all[len(all)-lines:]...)
	}
	return strings.Join(all, "\n")
}
