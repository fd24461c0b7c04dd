// Package memcached runs the real memcached and memcached_exporter for tests,
// from the arguments the operator writes into its pod template: the command
// line of a container becomes a local process, with only what must differ
// outside a pod changed (the port, loopback-only listening, the user).
package memcached

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
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
	// Ports maps the container's ports to the local ones.
	Ports map[int]int
	// PlainAddr is a plaintext listener: Addr, or with TLS on, the pod's
	// loopback listener.
	PlainAddr string

	access    *Access
	tls, auth bool
}

// Identity is who memcached runs as: in the pod, the pod's runAsUser; here,
// when the tests run as root, the same uid (memcached refuses root). A
// non-root test runner runs it as itself.
type Identity struct{ UID, GID uint32 }

// Access is what a test needs to run, and then reach, a memcached started
// with spec.security: the files of its Secret volumes, the client side of
// its TLS listener and the password its -Y file holds.
type Access struct {
	// Mounts maps a mount path in the pod to a local directory holding the
	// same files.
	Mounts map[string]string
	// TLS is the client configuration for the TLS listener (-Z): the CA,
	// the server name and, when memcached asks for one, a certificate.
	TLS *tls.Config
	// User and Password authenticate when memcached runs with -Y.
	User, Password string
}

// LocalArgs turns a memcached container's arguments into a local command
// line:
//   - the -p port becomes port; the listeners of an -l the operator wrote
//     (TLS on *, plaintext on the pod's loopback and on a migration port)
//     move to 127.0.0.1, the -p one to port and every other one to a free
//     port (ports maps container ports to local ones); without -l,
//     "-l 127.0.0.1" keeps memcached off other interfaces;
//   - mount paths in the pod become the local directories of mounts;
//   - -c is capped at this machine's hard open-file limit, because
//     memcached sets its limit to -c and an unprivileged process cannot
//     raise it (container runtimes give pods 524288 or more);
//   - with a memory file (-e, warm restart), -m is capped at a quarter of
//     the size of the RAM disk the file is on (the same cap on every start,
//     as a warm restart needs): memcached maps the whole file, and a
//     pod's claim for it holds -m of RAM, which this machine may not have.
//
// Everything else is passed through unchanged.
func LocalArgs(containerArgs []string, port int, mounts map[string]string) (args []string, ports map[int]int, clamped bool, err error) {
	args = slices.Clone(containerArgs)
	i := slices.Index(args, "-p")
	if i < 0 || i+1 >= len(args) {
		return nil, nil, false, fmt.Errorf("no -p PORT in %q", containerArgs)
	}
	ports = map[int]int{}
	if p, err := strconv.Atoi(args[i+1]); err == nil {
		ports[p] = port
	}
	args[i+1] = strconv.Itoa(port)
	for j := range args {
		for from, to := range mounts {
			args[j] = strings.ReplaceAll(args[j], from, to)
		}
	}
	if c := slices.Index(args, "-c"); c >= 0 && c+1 < len(args) {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return nil, nil, false, err
		}
		n, err := strconv.ParseUint(args[c+1], 10, 64)
		if err != nil {
			return nil, nil, false, fmt.Errorf("-c %q: %w", args[c+1], err)
		}
		if n > lim.Max {
			args[c+1] = strconv.FormatUint(lim.Max, 10)
			clamped = true
		}
	}
	if e, m := slices.Index(args, "-e"), slices.Index(args, "-m"); e >= 0 && e+1 < len(args) && m >= 0 && m+1 < len(args) {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(filepath.Dir(args[e+1]), &fs); err != nil {
			return nil, nil, false, fmt.Errorf("the memory file's directory: %w", err)
		}
		limit := fs.Blocks * uint64(fs.Bsize) >> 20 / 4 //nolint:gosec // block size is positive
		if n, err := strconv.ParseUint(args[m+1], 10, 64); err == nil && n > limit {
			args[m+1] = strconv.FormatUint(limit, 10)
			clamped = true
		}
	}
	l := slices.Index(args, "-l")
	if l < 0 || l+1 >= len(args) {
		return append(args, "-l", "127.0.0.1"), ports, clamped, nil
	}
	var listeners []string
	for listener := range strings.SplitSeq(args[l+1], ",") {
		prefix := ""
		if rest, ok := strings.CutPrefix(listener, "notls:"); ok {
			prefix, listener = "notls:", rest
		}
		i := strings.LastIndex(listener, ":")
		if i < 0 {
			return nil, nil, false, fmt.Errorf("-l %q: listener %q has no port", args[l+1], listener)
		}
		p, err := strconv.Atoi(listener[i+1:])
		if err != nil {
			return nil, nil, false, fmt.Errorf("-l %q: %w", args[l+1], err)
		}
		if _, ok := ports[p]; !ok {
			ports[p] = run.FreePortOrZero()
		}
		listeners = append(listeners, prefix+"127.0.0.1:"+strconv.Itoa(ports[p]))
	}
	args[l+1] = strings.Join(listeners, ",")
	return args, ports, clamped, nil
}

// Start runs memcached with a container's arguments until the test ends.
func Start(t testing.TB, containerArgs []string, id Identity) *Server {
	t.Helper()
	s, err := TryStart(containerArgs, id, run.FreePort(t), nil)
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
// stops it. access is nil unless the arguments come from spec.security.
// The error carries memcached's own message. A port taken between
// choosing it and binding it (another fixture got it first) is retried on
// another free port.
func TryStart(containerArgs []string, id Identity, port int, access *Access) (*Server, error) {
	for attempt := 0; ; attempt++ {
		s, err := tryStart(containerArgs, id, port, access)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "Address already in use") {
			return s, err
		}
		port = run.FreePortOrZero()
	}
}

func tryStart(containerArgs []string, id Identity, port int, access *Access) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if access == nil {
		access = &Access{}
	}
	args, ports, clamped, err := LocalArgs(containerArgs, port, access.Mounts)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Args: args, Clamped: clamped, Ports: ports,
		access: access, tls: slices.Contains(args, "-Z"), auth: slices.Contains(args, "-Y"),
	}
	s.PlainAddr = s.Addr
	if s.tls {
		// The operator's plaintext listener on the pod's loopback.
		s.PlainAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[loopbackPort]))
		if access.TLS == nil {
			return nil, errors.New("memcached runs with -Z: give an Access with a TLS client configuration")
		}
	}
	if s.auth && access.User == "" {
		return nil, errors.New("memcached runs with -Y: give an Access with a user and password")
	}
	var cred *syscall.Credential
	if syscall.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: id.UID, Gid: id.GID}
	}
	p, err := proc.TryStart(proc.Spec{
		Name: "memcached", Path: bin, Args: args, Credential: cred,
		// A cache keeps nothing worth an orderly exit, which takes memcached
		// up to a second.
		StopSignal:   syscall.SIGKILL,
		Ready:        s.version,
		ReadyTimeout: 20 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	s.Process = p
	// Another memcached that took a chosen port first (ports are chosen
	// free, then bound) answers the readiness check while this one exits:
	// the answer must come from this process.
	pid, err := s.stat("pid")
	if err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("stats pid: %w", err)
	}
	if pid != strconv.Itoa(p.PID()) {
		_ = p.Stop()
		return nil, fmt.Errorf("%s is answered by pid %s, not memcached's pid %d: Address already in use", s.PlainAddr, pid, p.PID())
	}
	return s, nil
}

// stat returns one value of `stats`.
func (s *Server) stat(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := s.DialPlain(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "stats\r\n"); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "END":
			return "", fmt.Errorf("stats: no %s", name)
		case len(f) == 3 && f[0] == "STAT" && f[1] == name:
			return f[2], nil
		}
	}
	return "", fmt.Errorf("stats: no END: %w", sc.Err())
}

// loopbackPort is where the operator's pods listen in plaintext on their
// loopback when TLS is on (cachev1alpha1.LoopbackPort; this package does
// not import the API).
const loopbackPort = 11210

// Dial connects to memcached's main port as a client of the pod would:
// over TLS when memcached runs with -Z, authenticated when with -Y.
func (s *Server) Dial(ctx context.Context) (net.Conn, error) {
	var cfg *tls.Config
	if s.tls {
		cfg = s.access.TLS
	}
	return DialClient(ctx, s.Addr, cfg, s.credentials())
}

// DialPlain connects to a plaintext listener: the main port, or with TLS
// on, the pod's loopback listener, the one its exporter and reloader use.
func (s *Server) DialPlain(ctx context.Context) (net.Conn, error) {
	return DialClient(ctx, s.PlainAddr, nil, s.credentials())
}

func (s *Server) credentials() *Credentials {
	if !s.auth {
		return nil
	}
	return &Credentials{User: s.access.User, Password: s.access.Password}
}

// ErrCredentialsRefused is memcached's answer to a user and password its
// -Y file does not hold: memcached is up, the credentials are not in force.
var ErrCredentialsRefused = errors.New("credentials refused")

// Credentials are a user and password of memcached's password file.
type Credentials struct{ User, Password string }

// DialClient connects to a memcached at addr as its clients do: over TLS
// when tlsConfig is set, then, with credentials, authenticated with the
// ASCII protocol's "set auth", which memcached requires before anything
// else when it runs with -Y.
func DialClient(ctx context.Context, addr string, tlsConfig *tls.Config, credentials *Credentials) (net.Conn, error) {
	var conn net.Conn
	var err error
	if tlsConfig != nil {
		conn, err = (&tls.Dialer{Config: tlsConfig}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = new(net.Dialer).DialContext(ctx, "tcp", addr)
	}
	if err != nil || credentials == nil {
		return conn, err
	}
	token := credentials.User + " " + credentials.Password
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
		_ = conn.Close()
		return nil, err
	}
	// Read byte by byte: nothing after the answer may be consumed here.
	var line []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(line, []byte("\n")) {
		if _, err := conn.Read(b); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("authenticate: %w", err)
		}
		line = append(line, b[0])
	}
	if got := strings.TrimSpace(string(line)); got != "STORED" {
		_ = conn.Close()
		return nil, fmt.Errorf("authenticate as %s: memcached answers %q: %w", credentials.User, got, ErrCredentialsRefused)
	}
	return conn, nil
}

// version asks memcached for its version, the cheapest full round trip.
func (s *Server) version(ctx context.Context) error {
	conn, err := s.DialPlain(ctx)
	if errors.Is(err, ErrCredentialsRefused) {
		// memcached answered: it is up. That the password is not in force
		// is the caller's finding (TryStart's next step reports it).
		return nil
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := s.DialPlain(ctx)
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
// memcached client library, connected as Dial connects.
func (s *Server) SetGet(size int) error {
	value := []byte(strings.Repeat("m", size))
	key := fmt.Sprintf("probe-%d", size)
	if err := s.client().Set(&memcache.Item{Key: key, Value: value}); err != nil {
		return fmt.Errorf("set %d bytes: %w", size, err)
	}
	return s.Get(key, size)
}

// Get gets key, which must hold size bytes.
func (s *Server) Get(key string, size int) error {
	it, err := s.client().Get(key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if len(it.Value) != size {
		return fmt.Errorf("get %s returned %d bytes, want %d", key, len(it.Value), size)
	}
	return nil
}

func (s *Server) client() *memcache.Client {
	c := memcache.New(s.Addr)
	c.Timeout = 5 * time.Second
	c.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return s.Dial(ctx) }
	return c
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
