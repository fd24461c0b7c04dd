// Package memcached runs the real memcached and memcached_exporter for tests,
// from the arguments the operator writes into its pod template: the command
// line of a container becomes a local process, with only what must differ
// outside a pod changed (the port, loopback-only listening, the user).
package memcached

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Binary is the memcached on PATH. `make test` installs Debian's memcached
// package first (scripts/test-deps.sh); without it the tests fail with the
// package to install, never skip.
func Binary() (string, error) {
	path, err := exec.LookPath("memcached")
	if err != nil {
		return "", errors.New("memcached is not on PATH: install the Debian/Ubuntu package 'memcached' (make test does it as root with apt-get: scripts/test-deps.sh)")
	}
	return path, nil
}

// Server is a running memcached.
type Server struct {
	*proc.Process
	Addr string
	// Args is the command line it runs with.
	Args []string
	// Clamped is set when -c was lowered to this machine's open-file limit
	// (see LocalArgs).
	Clamped bool
}

// Identity is who memcached runs as: in the pod, the pod's runAsUser; here,
// when the tests run as root, the same uid (memcached refuses root). A
// non-root test runner runs it as itself.
type Identity struct{ UID, GID uint32 }

// LocalArgs turns a memcached container's arguments into a local command
// line: the -p value becomes port, -l 127.0.0.1 keeps it off other
// interfaces, and -c is capped at this machine's hard open-file limit,
// because memcached sets its limit to -c and an unprivileged process cannot
// raise it (container runtimes give pods 524288 or more). Everything else is
// passed through unchanged.
func LocalArgs(containerArgs []string, port int) (args []string, clamped bool, err error) {
	args = slices.Clone(containerArgs)
	i := slices.Index(args, "-p")
	if i < 0 || i+1 >= len(args) {
		return nil, false, fmt.Errorf("no -p PORT in %q", containerArgs)
	}
	args[i+1] = strconv.Itoa(port)
	if c := slices.Index(args, "-c"); c >= 0 && c+1 < len(args) {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return nil, false, err
		}
		n, err := strconv.ParseUint(args[c+1], 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("-c %q: %w", args[c+1], err)
		}
		if n > lim.Max {
			args[c+1] = strconv.FormatUint(lim.Max, 10)
			clamped = true
		}
	}
	return append(args, "-l", "127.0.0.1"), clamped, nil
}

// Start runs memcached with a container's arguments until the test ends.
func Start(t testing.TB, containerArgs []string, id Identity) *Server {
	t.Helper()
	s, err := TryStart(containerArgs, id, run.FreePort(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("memcached: %v", err)
		}
	})
	return s
}

// TryStart runs memcached on port and waits until it answers; the caller
// stops it. The error carries memcached's own message. A port taken
// between choosing it and binding it (another fixture got it first) is
// retried on another free port.
func TryStart(containerArgs []string, id Identity, port int) (*Server, error) {
	for attempt := 0; ; attempt++ {
		s, err := tryStart(containerArgs, id, port)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "Address already in use") {
			return s, err
		}
		port = run.FreePortOrZero()
	}
}

func tryStart(containerArgs []string, id Identity, port int) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	args, clamped, err := LocalArgs(containerArgs, port)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var cred *syscall.Credential
	if syscall.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: id.UID, Gid: id.GID}
	}
	p, err := proc.TryStart(proc.Spec{
		Name: "memcached", Path: bin, Args: args, Credential: cred,
		// A cache keeps nothing worth an orderly exit, which takes memcached
		// up to a second.
		StopSignal:   syscall.SIGKILL,
		Ready:        func(ctx context.Context) error { return version(ctx, addr) },
		ReadyTimeout: 20 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &Server{Process: p, Addr: addr, Args: args, Clamped: clamped}, nil
}

// version asks memcached for its version, the cheapest full round trip.
func version(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "version\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return fmt.Errorf("unexpected answer %q", line)
	}
	return nil
}

// Settings returns `stats settings`: what memcached actually runs with.
func (s *Server) Settings() (map[string]string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "stats settings\r\n"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "END" {
			return out, nil
		}
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "STAT" {
			out[f[1]] = f[2]
		}
	}
	return nil, fmt.Errorf("stats settings: no END: %w", sc.Err())
}

// SetGet stores a value of size bytes under a key and reads it back with a
// memcached client library.
func (s *Server) SetGet(size int) error {
	c := memcache.New(s.Addr)
	c.Timeout = 5 * time.Second
	value := []byte(strings.Repeat("m", size))
	key := fmt.Sprintf("probe-%d", size)
	if err := c.Set(&memcache.Item{Key: key, Value: value}); err != nil {
		return fmt.Errorf("set %d bytes: %w", size, err)
	}
	it, err := c.Get(key)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if len(it.Value) != size {
		return fmt.Errorf("get returned %d bytes, want %d", len(it.Value), size)
	}
	return nil
}

// Exporter is a running memcached_exporter.
type Exporter struct {
	*proc.Process
	URL string
}

// ExporterArgs turns the exporter sidecar's arguments into local ones: the
// memcached address points at memcachedAddr and the listen address at port.
func ExporterArgs(containerArgs []string, memcachedAddr string, port int) ([]string, error) {
	args := slices.Clone(containerArgs)
	var seen int
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--memcached.address="):
			args[i] = "--memcached.address=" + memcachedAddr
			seen++
		case strings.HasPrefix(a, "--web.listen-address="):
			args[i] = fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)
			seen++
		}
	}
	if seen != 2 {
		return nil, fmt.Errorf("exporter args %q lack --memcached.address= or --web.listen-address=", containerArgs)
	}
	return args, nil
}

// TryStartExporter runs bin/memcached_exporter with the sidecar's
// arguments against memcachedAddr and waits for its metrics endpoint,
// retrying on another port if the chosen one was taken meanwhile.
func TryStartExporter(containerArgs []string, memcachedAddr string, port int) (*Exporter, error) {
	for attempt := 0; ; attempt++ {
		e, err := tryStartExporter(containerArgs, memcachedAddr, port)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			return e, err
		}
		port = run.FreePortOrZero()
	}
}

func tryStartExporter(containerArgs []string, memcachedAddr string, port int) (*Exporter, error) {
	bins, err := repo.Bin("memcached_exporter")
	if err != nil {
		return nil, err
	}
	args, err := ExporterArgs(containerArgs, memcachedAddr, port)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	p, err := proc.TryStart(proc.Spec{
		Name: "memcached_exporter", Path: bins["memcached_exporter"], Args: args,
		Ready: func(ctx context.Context) error { _, err := run.HTTPGet(ctx, url); return err },
	})
	if err != nil {
		return nil, err
	}
	return &Exporter{Process: p, URL: url}, nil
}

// Metrics scrapes the exporter once.
func (e *Exporter) Metrics() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return run.HTTPGet(ctx, e.URL)
}

// UnprivilegedIdentity is the pod's uid when the pod sets one, else a
// uid in the range platforms such as OpenShift assign.
func UnprivilegedIdentity(runAsUser, runAsGroup *int64) Identity {
	id := Identity{UID: 1000650000, GID: 1000650000}
	if runAsUser != nil {
		id.UID = uint32(*runAsUser)
	}
	if runAsGroup != nil {
		id.GID = uint32(*runAsGroup)
	}
	return id
}
