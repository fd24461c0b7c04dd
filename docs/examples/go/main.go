// Command cacheclient is a client of a secured Memcached (spec.security),
// with github.com/bradfitz/gomemcache, the most used Go memcached library.
//
// It presents the client certificate of a mounted Secret (tls.crt,
// tls.key; ca.crt checks the server) and authenticates each connection
// with the ASCII protocol's "set auth", which memcached requires before
// anything else when the Memcached has spec.security.auth. gomemcache has
// no setting for either; both go in its DialContext, which every new
// connection goes through, a reconnect included.
//
//	go run . --server app-cache-0.app-cache.cache.svc:11211 --server app-cache-1.app-cache.cache.svc:11211 \
//	    --tls-dir /etc/cache-client --auth-file /etc/cache-auth/auth-file set greeting hello
//	go run . ... get greeting
//
// Pass each server of status.serverList. With a Stable cache each is a
// pod's name, verified as itself. With an Ephemeral one the list holds pod
// addresses, which no certificate names: add --server-name with the
// Service's name, the name each of them is verified as
// (docs/security.md#host-names).
//
// test/memcached runs it against memcached started with the operator's
// arguments (docs/security.md).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cacheclient:", err)
		os.Exit(1)
	}
}

func run() error {
	var servers serverList
	flag.Var(&servers, "server", "host:port; repeat for each server (status.serverList)")
	tlsDir := flag.String("tls-dir", "", "directory of the client certificate Secret: tls.crt, tls.key and ca.crt")
	authFile := flag.String("auth-file", "", "the password Secret's auth-file; its first line's user:password is used")
	serverName := flag.String("server-name", "", "verify every server as this name (an Ephemeral cache: the Service's name)")
	flag.Parse()
	args := flag.Args()
	if len(servers) == 0 || len(args) < 2 || (args[0] == "set" && len(args) != 3) || (args[0] != "set" && args[0] != "get") {
		return errors.New("usage: cacheclient --server HOST:PORT [--server ...] [--tls-dir DIR] [--auth-file FILE] [--server-name NAME] set KEY VALUE | get KEY")
	}
	client := memcache.New(servers...)
	client.Timeout = 2 * time.Second
	dial, err := dialer(servers, *tlsDir, *authFile, *serverName)
	if err != nil {
		return err
	}
	client.DialContext = dial

	switch args[0] {
	case "set":
		if err := client.Set(&memcache.Item{Key: args[1], Value: []byte(args[2])}); err != nil {
			return err
		}
		fmt.Println("STORED")
		return nil
	default:
		item, err := client.Get(args[1])
		if err != nil {
			return err
		}
		fmt.Println(string(item.Value))
		return nil
	}
}

// serverList is the repeated --server flag.
type serverList []string

func (l *serverList) String() string     { return strings.Join(*l, ",") }
func (l *serverList) Set(s string) error { *l = append(*l, s); return nil }

// dialer connects to a server over TLS when tlsDir is set, verifying it as
// serverName or else as the name it was listed by, then authenticates the
// connection when authFile is set.
func dialer(servers []string, tlsDir, authFile, serverName string) (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	var config *tls.Config
	if tlsDir != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "tls.crt"), filepath.Join(tlsDir, "tls.key"))
		if err != nil {
			return nil, err
		}
		ca, err := os.ReadFile(filepath.Join(tlsDir, "ca.crt"))
		if err != nil {
			return nil, err
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s holds no certificate", filepath.Join(tlsDir, "ca.crt"))
		}
		config = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	var user, password string
	if authFile != "" {
		var err error
		if user, password, err = credentials(authFile); err != nil {
			return nil, err
		}
	}
	// gomemcache dials the address it resolved each server to, so the
	// name a server was listed by is looked up here, resolved the same way.
	names := map[string]string{}
	for _, s := range servers {
		addr, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(s)
		names[addr.String()] = host
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if config == nil {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
		} else {
			c := config.Clone()
			c.ServerName = serverName
			if c.ServerName == "" {
				c.ServerName = names[address]
			}
			conn, err = (&tls.Dialer{Config: c}).DialContext(ctx, network, address)
		}
		if err != nil || user == "" {
			return conn, err
		}
		if err := authenticate(ctx, conn, user, password); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}, nil
}

// credentials are the user and password of the auth file's first line.
func credentials(path string) (user, password string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	user, password, ok := strings.Cut(strings.TrimSpace(first), ":")
	if !ok {
		return "", "", fmt.Errorf("%s: the first line is not user:password", path)
	}
	return user, password, nil
}

// authenticate sends memcached's ASCII authentication, a "set" of any key
// whose value is "user password", and expects STORED.
func authenticate(ctx context.Context, conn net.Conn, user, password string) error {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	token := user + " " + password
	if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("memcached did not answer user %s's authentication: %w", user, err)
	}
	if reply != "STORED\r\n" {
		return fmt.Errorf("memcached refused user %s: %q", user, strings.TrimSpace(reply))
	}
	return nil
}
