// Command memcached-cli is a small memcached client for the local
// cluster's pods (make memcached-cli, and the real-node tests): it speaks
// memcached's text protocol and prints what the server answers.
//
// memcached servers do not share keys: a client spreads keys over them. So
// when the server's name resolves to several addresses (the Memcached's
// headless Service: one per pod), a key goes to the address its hash picks
// among them sorted, as a client library's hashing would, and the same key
// finds the same pod on every call; stats asks each of them.
//
// A secured Memcached (spec.security) takes two more flags, which are also
// this repository's Go example of a client (docs/security.md):
//
//	-tls-dir DIR     a mounted client certificate Secret (tls.crt and
//	                 tls.key to present, ca.crt to check the server, whose
//	                 name is -server's host), as cert-manager writes it;
//	-auth-file FILE  a user:password line, sent as the ASCII protocol's
//	                 "set auth" on each connection before anything else.
//
//	memcached-cli [-server host:port] [-retry 30s] set KEY VALUE [TTL]
//	memcached-cli [-server host:port] get KEY        (exit 1 on a miss)
//	memcached-cli [-server host:port] delete KEY
//	memcached-cli [-server host:port] stats [NAME]   (one statistic, or all)
//
// and a benchmark of the server's data path as a client sees it (make
// bench's real-node section): every key written once, then a mix of gets
// and sets on several connections, bounded in time and size, printing one
// JSON object with the throughput and the latency percentiles:
//
//	memcached-cli [-server host:port] bench [-servers a:p,b:p] [-duration 10s]
//	    [-connections 8] [-keys 10000] [-value-size 100] [-get-ratio 0.9]
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// errMiss is a get of a key the server does not hold.
var errMiss = errors.New("miss")

func main() {
	server := flag.String("server", "localhost:11211", "memcached's host:port (a Service name works in a pod)")
	timeout := flag.Duration("timeout", 5*time.Second, "connect and I/O timeout")
	retry := flag.Duration("retry", 0, "keep retrying a failed connection this long (a Service just created, a pod starting)")
	tlsDir := flag.String("tls-dir", "", "speak TLS with the client certificate in this directory (tls.crt, tls.key, ca.crt), for a Memcached with spec.security.tls")
	authFile := flag.String("auth-file", "", "authenticate with the user:password line of this file, for a Memcached with spec.security.auth")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: memcached-cli [-server host:port] set KEY VALUE [TTL] | get KEY | delete KEY | stats [NAME] | bench [flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	d, err := newDialer(*server, *timeout, *tlsDir, *authFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "memcached-cli: %v\n", err)
		os.Exit(2)
	}
	if flag.Arg(0) == "bench" {
		os.Exit(bench(d, *server, flag.Args()[1:]))
	}
	out, err := runAll(d, *server, flag.Args())
	for deadline := time.Now().Add(*retry); isConnError(err) && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		out, err = runAll(d, *server, flag.Args())
	}
	if out != "" {
		fmt.Println(out)
	}
	switch {
	case errors.Is(err, errMiss):
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "memcached-cli: %v\n", err)
		os.Exit(2)
	}
}

// dialer connects to one memcached as the flags say.
type dialer struct {
	timeout        time.Duration
	tls            *tls.Config
	user, password string
}

func newDialer(server string, timeout time.Duration, tlsDir, authFile string) (*dialer, error) {
	d := &dialer{timeout: timeout}
	if tlsDir != "" {
		cert, err := tls.LoadX509KeyPair(tlsDir+"/tls.crt", tlsDir+"/tls.key")
		if err != nil {
			return nil, fmt.Errorf("-tls-dir: %w", err)
		}
		ca, err := os.ReadFile(tlsDir + "/ca.crt")
		if err != nil {
			return nil, fmt.Errorf("-tls-dir: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("-tls-dir: %s/ca.crt holds no PEM certificate", tlsDir)
		}
		// The certificate names the Service, whichever pod answers.
		host, _, _ := net.SplitHostPort(server)
		d.tls = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if authFile != "" {
		b, err := os.ReadFile(authFile)
		if err != nil {
			return nil, fmt.Errorf("-auth-file: %w", err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		var ok bool
		if d.user, d.password, ok = strings.Cut(strings.TrimSpace(first), ":"); !ok || d.user == "" {
			return nil, fmt.Errorf("-auth-file %s: want a user:password line", authFile)
		}
	}
	return d, nil
}

// dial connects to addr, over TLS with -tls-dir, and authenticates with
// -auth-file: memcached answers nothing else on the connection before.
func (d *dialer) dial(addr string) (net.Conn, *bufio.Reader, error) {
	var conn net.Conn
	var err error
	if d.tls != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: d.timeout}, "tcp", addr, d.tls)
	} else {
		conn, err = net.DialTimeout("tcp", addr, d.timeout)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(d.timeout)); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	r := bufio.NewReader(conn)
	if d.user != "" {
		token := d.user + " " + d.password
		if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
		reply, err := r.ReadString('\n')
		if err != nil {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("authenticate as %s: %w", d.user, err)
		}
		if reply = strings.TrimSpace(reply); reply != "STORED" {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("memcached refused user %s: %s", d.user, reply)
		}
	}
	return conn, r, nil
}

// runAll runs the command on the server the key hashes to, or for stats
// on each server the name resolves to, prefixing each answer with it.
func runAll(d *dialer, server string, args []string) (string, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return "", fmt.Errorf("-server %q: want host:port", server)
	}
	addrs, err := net.LookupHost(host)
	if err != nil {
		return "", &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	sort.Strings(addrs)
	if len(addrs) == 1 {
		return run(d, net.JoinHostPort(addrs[0], port), args)
	}
	if len(args) > 0 && args[0] == "stats" {
		var lines []string
		for _, a := range addrs {
			out, err := run(d, net.JoinHostPort(a, port), args)
			if err != nil {
				return "", err
			}
			for _, l := range strings.Split(out, "\n") {
				lines = append(lines, a+" "+l)
			}
		}
		return strings.Join(lines, "\n"), nil
	}
	if len(args) < 2 {
		return run(d, net.JoinHostPort(addrs[0], port), args)
	}
	return run(d, net.JoinHostPort(addrs[crc32.ChecksumIEEE([]byte(args[1]))%uint32(len(addrs))], port), args)
}

// isConnError is a failure to connect, which a retry may cure.
func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func run(d *dialer, server string, args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("no command: want set, get, delete or stats")
	}
	conn, r, err := d.dial(server)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	send := func(s string) error { _, err := conn.Write([]byte(s)); return err }
	line := func() (string, error) {
		l, err := r.ReadString('\n')
		return strings.TrimRight(l, "\r\n"), err
	}
	switch cmd := args[0]; {
	case cmd == "set" && (len(args) == 3 || len(args) == 4):
		ttl := "0"
		if len(args) == 4 {
			if _, err := strconv.Atoi(args[3]); err != nil {
				return "", fmt.Errorf("TTL %q: want seconds", args[3])
			}
			ttl = args[3]
		}
		if err := send(fmt.Sprintf("set %s 0 %s %d\r\n%s\r\n", args[1], ttl, len(args[2]), args[2])); err != nil {
			return "", err
		}
		reply, err := line()
		if err == nil && reply != "STORED" {
			err = fmt.Errorf("set %s: %s", args[1], reply)
		}
		return reply, err
	case cmd == "get" && len(args) == 2:
		if err := send("get " + args[1] + "\r\n"); err != nil {
			return "", err
		}
		header, err := line()
		if err != nil {
			return "", err
		}
		if header == "END" {
			return "", errMiss
		}
		fields := strings.Fields(header)
		if len(fields) != 4 || fields[0] != "VALUE" {
			return "", fmt.Errorf("get %s: %s", args[1], header)
		}
		value, err := line()
		return value, err
	case cmd == "delete" && len(args) == 2:
		if err := send("delete " + args[1] + "\r\n"); err != nil {
			return "", err
		}
		return line()
	case cmd == "stats" && len(args) <= 2:
		if err := send("stats\r\n"); err != nil {
			return "", err
		}
		var all []string
		for {
			l, err := line()
			if err != nil {
				return "", err
			}
			if l == "END" {
				break
			}
			stat := strings.TrimPrefix(l, "STAT ")
			if len(args) == 2 {
				if name, value, _ := strings.Cut(stat, " "); name == args[1] {
					return value, nil
				}
				continue
			}
			all = append(all, stat)
		}
		if len(args) == 2 {
			return "", fmt.Errorf("no statistic %q", args[1])
		}
		return strings.Join(all, "\n"), nil
	default:
		return "", fmt.Errorf("%q: want set KEY VALUE [TTL], get KEY, delete KEY or stats [NAME]", strings.Join(args, " "))
	}
}
