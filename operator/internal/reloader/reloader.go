// Package reloader is the sidecar of a Memcached with spec.security or
// warm restart (which WarmStop serves, in warmstop.go). The
// kubelet rewrites a mounted Secret in place when it changes (cert-manager
// renewing a certificate, a password rotated); memcached, though, reads its
// certificate and its password file only at start, and restarting it would
// empty the cache. The reloader watches the mounted files and makes the
// running memcached load them:
//
//   - a certificate, key or CA with the refresh_certs command, sent on the
//     pod's loopback listener (plaintext, so it needs no client certificate
//     even when memcached requires one, and it never leaves the pod);
//   - the password file with SIGHUP, which memcached answers by rereading it
//     (the pod shares its process namespace for this).
//
// A rotation therefore takes the kubelet's Secret sync (about a minute)
// plus one poll interval, and keeps every key.
//
// With auth, memcached answers nothing before "set auth", and
// memcached_exporter cannot send it. The reloader then also listens on the
// pod's loopback for the exporter (ServeExporter) and authenticates each
// of its connections with the password file's first entry, read at connect
// time, so a rotated password is used from the next scrape.
package reloader

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config says what the reloader watches and where memcached listens.
type Config struct {
	// TLSDir is the mounted TLS Secret (tls.crt, tls.key, optional ca.crt);
	// empty when TLS is off.
	TLSDir string
	// AuthFile is the mounted password file; empty when auth is off.
	AuthFile string
	// Address is memcached's plaintext listener inside the pod.
	Address string
	// ExporterListenAddress, when set, is where the exporter connects
	// instead of memcached: each connection is authenticated with AuthFile,
	// then relayed to Address.
	ExporterListenAddress string
	// Interval between two looks at the files.
	Interval time.Duration
	// MemoryFile is memcached's memory file (-e) with warm restart; empty
	// without. Run does not use it: the caller runs WarmStop when the pod
	// stops.
	MemoryFile string
	// Signal sends SIGHUP to memcached; nil uses SignalMemcached.
	Signal func() error
	Log    *slog.Logger
}

// Run reloads until ctx ends. Its first pass loads the files once, which
// is harmless and catches a rotation that happened while memcached was
// starting. A failed load is retried on the next pass.
func Run(ctx context.Context, cfg Config) error {
	if cfg.TLSDir == "" && cfg.AuthFile == "" {
		if cfg.MemoryFile == "" {
			return errors.New("nothing to do: give --tls-dir, --auth-file, --memory-file or several")
		}
		<-ctx.Done()
		return nil
	}
	if cfg.Signal == nil {
		cfg.Signal = func() error { return SignalMemcached(cfg.AuthFile, syscall.SIGHUP) }
	}
	if cfg.ExporterListenAddress != "" {
		if cfg.AuthFile == "" {
			return errors.New("--exporter-listen-address authenticates with the password file: give --auth-file too")
		}
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.ExporterListenAddress)
		if err != nil {
			return fmt.Errorf("listen for the exporter: %w", err)
		}
		cfg.Log.Info("relaying the exporter's connections, authenticated", "listen", ln.Addr().String(), "memcached", cfg.Address)
		go ServeExporter(ctx, ln, cfg.Address, cfg.AuthFile, cfg.Log)
	}
	var loadedTLS, loadedAuth string
	ticker := time.NewTicker(cfg.Interval)
	defer ticker.Stop()
	for {
		if cfg.TLSDir != "" {
			if sum, err := fingerprint(tlsFiles(cfg.TLSDir)...); err != nil {
				cfg.Log.Error("read the TLS files", "err", err)
			} else if sum != loadedTLS {
				if err := RefreshCerts(ctx, cfg.Address, cfg.AuthFile); err != nil {
					cfg.Log.Error("refresh_certs", "err", err)
				} else {
					loadedTLS = sum
					cfg.Log.Info("memcached loaded the certificate", "serial", serial(filepath.Join(cfg.TLSDir, "tls.crt")))
				}
			}
		}
		if cfg.AuthFile != "" {
			if sum, err := fingerprint(cfg.AuthFile); err != nil {
				cfg.Log.Error("read the password file", "err", err)
			} else if sum != loadedAuth {
				if err := reloadAuth(ctx, cfg); err != nil {
					cfg.Log.Error("reload the password file", "err", err)
				} else {
					loadedAuth = sum
					cfg.Log.Info("memcached loaded the password file")
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func tlsFiles(dir string) []string {
	files := []string{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")}
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err == nil {
		files = append(files, filepath.Join(dir, "ca.crt"))
	}
	return files
}

// fingerprint hashes the files' contents. The kubelet swaps a whole
// Secret at once, so the files are read together after each swap.
func fingerprint(files ...string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// RefreshCerts asks memcached at address to reload its certificate, key
// and CA, authenticating first with the password file's first entry when
// authFile is set. memcached keeps the old ones when the new ones do not
// load, and says so.
func RefreshCerts(ctx context.Context, address, authFile string) error {
	conn, r, err := dial(ctx, address, authFile)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "refresh_certs\r\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("refresh_certs: %w", err)
	}
	if line = strings.TrimSpace(line); line != "OK" {
		return fmt.Errorf("memcached kept its old certificate: refresh_certs answered %q", line)
	}
	return nil
}

// ServeExporter accepts the exporter's connections on ln until ctx ends,
// and relays each one to memcached at address after authenticating it with
// authFile's first entry. A connection memcached refuses is closed, so the
// exporter reports memcached_up 0 rather than being served by a proxy that
// hides the refusal.
func ServeExporter(ctx context.Context, ln net.Listener, address, authFile string, log *slog.Logger) {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		client, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Error("accept the exporter's connection", "err", err)
			}
			return
		}
		go func() {
			defer func() { _ = client.Close() }()
			upstream, r, err := dial(ctx, address, authFile)
			if err != nil {
				log.Error("authenticate the exporter's connection", "err", err)
				return
			}
			defer func() { _ = upstream.Close() }()
			_ = upstream.SetDeadline(time.Time{})
			done := make(chan struct{})
			go func() {
				// memcached's answers, including any bytes r already read.
				_, _ = io.Copy(client, r)
				_ = client.Close()
				close(done)
			}()
			_, _ = io.Copy(upstream, client)
			_ = upstream.Close()
			<-done
		}()
	}
}

// reloadAuth signals memcached, then checks that the file's first entry
// is accepted: memcached rereads the file asynchronously.
func reloadAuth(ctx context.Context, cfg Config) error {
	if err := cfg.Signal(); err != nil {
		return err
	}
	var err error
	for range 20 {
		var conn net.Conn
		if conn, _, err = dial(ctx, cfg.Address, cfg.AuthFile); err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("after SIGHUP: %w", err)
}

// dial connects to memcached and authenticates when authFile is set.
func dial(ctx context.Context, address, authFile string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if authFile != "" {
		user, password, err := FirstCredential(authFile)
		if err == nil {
			err = Authenticate(conn, r, user, password)
		}
		if err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
	}
	return conn, r, nil
}

// FirstCredential is the first user:password line of a memcached password file.
func FirstCredential(authFile string) (user, password string, err error) {
	b, err := os.ReadFile(authFile)
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(string(b)) {
		if u, p, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok && u != "" {
			return u, p, nil
		}
	}
	return "", "", fmt.Errorf("%s has no user:password line", authFile)
}

// Authenticate is memcached's ASCII authentication: a set whose value is
// "user password", answered STORED when accepted.
func Authenticate(conn net.Conn, r *bufio.Reader, user, password string) error {
	token := user + " " + password
	if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	if line = strings.TrimSpace(line); line != "STORED" {
		return fmt.Errorf("memcached refused user %q: %s", user, line)
	}
	return nil
}

// SignalMemcached sends sig to the memcached that reads authFile (started
// with -Y authFile), which the pod's shared process namespace makes
// visible. Matching the file, not only the process name, keeps the signal
// off any other memcached this process can see: a memcached still
// starting has no SIGHUP handler yet and would die of one.
func SignalMemcached(authFile string, sig syscall.Signal) error {
	pids, err := memcachedPIDs(func(args []string) bool { return takesFile(args, authFile, "-Y", "--auth-file") })
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("no memcached reading %s is visible: the pod must share its process namespace (spec.shareProcessNamespace)", authFile)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("signal memcached (pid %d): %w", pid, err)
		}
	}
	return nil
}

// memcachedPIDs lists the visible memcached processes whose arguments
// match.
func memcachedPIDs(match func(args []string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || string(bytes.TrimSpace(comm)) != "memcached" {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !match(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// takesFile reports whether memcached's arguments give it file with the
// option short or long, in any spelling getopt_long reads: -Y FILE,
// -YFILE, --auth-file FILE, --auth-file=FILE.
func takesFile(args []string, file, short, long string) bool {
	for i, a := range args {
		switch {
		case (a == short || a == long) && i+1 < len(args) && args[i+1] == file,
			a == short+file, a == long+"="+file:
			return true
		}
	}
	return false
}

// serial is the certificate's serial number in hexadecimal, for the log.
func serial(certFile string) string {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return ""
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%X", cert.SerialNumber)
}
