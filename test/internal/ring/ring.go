// Package ring is a memcached client that shards keys over a server list
// the way most memcached clients do: a ketama consistent-hash ring
// (libketama, spymemcached's KETAMA_HASH and libmemcached's
// MEMCACHED_BEHAVIOR_KETAMA): 160 points per server, each the MD5 of
// "<server>-<i>" read as four little-endian 32-bit points, and a key goes
// to the first point at or after the first four bytes of its own MD5.
// The ring is keyed on the server list's entries, so a server that comes
// back under the same entry takes back the same keys.
//
// The real-node hit-ratio measurement (test/e2e) drives it from
// status.serverList; gomemcache's ServerList is not used because it hashes
// modulo the number of servers, which moves most keys on any change.
package ring

import (
	"bufio"
	"crypto/md5" //nolint:gosec // ketama's hash, not a security boundary
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const pointsPerServer = 160

type point struct {
	hash   uint32
	server string
}

// Ring maps keys to server list entries.
type Ring struct {
	points  []point
	servers []string
}

// New builds the ring of servers (entries as status.serverList gives
// them, host:port).
func New(servers []string) *Ring {
	r := &Ring{servers: slices.Clone(servers)}
	for _, s := range servers {
		for i := range pointsPerServer / 4 {
			sum := md5.Sum([]byte(s + "-" + strconv.Itoa(i))) //nolint:gosec // ketama
			for j := range 4 {
				r.points = append(r.points, point{binary.LittleEndian.Uint32(sum[4*j:]), s})
			}
		}
	}
	slices.SortFunc(r.points, func(a, b point) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return strings.Compare(a.server, b.server)
	})
	return r
}

// Servers are the entries the ring was built from.
func (r *Ring) Servers() []string { return r.servers }

// Server is the entry key belongs to, or "" on an empty ring.
func (r *Ring) Server(key string) string {
	if len(r.points) == 0 {
		return ""
	}
	sum := md5.Sum([]byte(key)) //nolint:gosec // ketama
	h := binary.LittleEndian.Uint32(sum[:4])
	i, _ := slices.BinarySearchFunc(r.points, h, func(p point, h uint32) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].server
}

// ErrMiss is a get that found no value: for a cache, not an error.
var ErrMiss = errors.New("miss")

// Conns keeps one text-protocol connection per address. It is safe for
// concurrent use; each connection serves one request at a time.
type Conns struct {
	mu    sync.Mutex
	conns map[string]*conn
}

type conn struct {
	mu sync.Mutex
	c  net.Conn
	r  *bufio.Reader
}

// NewConns returns an empty connection pool.
func NewConns() *Conns { return &Conns{conns: map[string]*conn{}} }

func (p *Conns) get(addr string) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[addr]
	if c == nil {
		c = &conn{}
		p.conns[addr] = c
	}
	return c
}

// do sends one request to addr and reads its answer with read; a broken
// connection is dropped, so the next request dials again.
func (p *Conns) do(addr, request string, read func(*bufio.Reader) error) error {
	c := p.get(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		c.c, c.r = nc, bufio.NewReader(nc)
	}
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.c.Write([]byte(request)); err != nil {
		_ = c.c.Close()
		c.c = nil
		return err
	}
	if err := read(c.r); err != nil {
		_ = c.c.Close()
		c.c = nil
		return err
	}
	return nil
}

// Set stores value under key at addr.
func (p *Conns) Set(addr, key, value string) error {
	return p.do(addr, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value), func(r *bufio.Reader) error {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "STORED" {
			return fmt.Errorf("set %s: %s", key, strings.TrimSpace(line))
		}
		return nil
	})
}

// Get reads key at addr: its value, ErrMiss, or the error that kept the
// server from answering.
func (p *Conns) Get(addr, key string) (string, error) {
	var value string
	found := false
	err := p.do(addr, "get "+key+"\r\n", func(r *bufio.Reader) error {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			line = strings.TrimSpace(line)
			switch {
			case line == "END":
				return nil
			case strings.HasPrefix(line, "VALUE "):
				fields := strings.Fields(line)
				n, err := strconv.Atoi(fields[len(fields)-1])
				if err != nil {
					return fmt.Errorf("get %s: %q", key, line)
				}
				buf := make([]byte, n+2)
				if _, err := readFull(r, buf); err != nil {
					return err
				}
				value, found = string(buf[:n]), true
			default:
				return fmt.Errorf("get %s: %q", key, line)
			}
		}
	})
	if err != nil {
		return "", err
	}
	if !found {
		return "", ErrMiss
	}
	return value, nil
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close closes every connection.
func (p *Conns) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		if c.c != nil {
			_ = c.c.Close()
			c.c = nil
		}
		c.mu.Unlock()
	}
}
