package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of a bench run: it is a benchmark tool for the cluster's own
// pods, not a load test that could run away.
const (
	maxBenchDuration    = 5 * time.Minute
	maxBenchConnections = 64
	maxBenchKeys        = 1_000_000
	maxBenchValueSize   = 1 << 20
)

// benchConfig is what `memcached-cli bench` runs.
type benchConfig struct {
	Duration    time.Duration
	Connections int
	Keys        int
	ValueSize   int
	GetRatio    float64
	// Servers are the addresses the connections go to, round-robin; a
	// connection that fails is dialled again to the next one.
	Servers []string
	// Resolve, when the servers came from a name (-server), is that
	// host:port: a connection that fails looks the name up again, as a
	// client of a Service does when its pods are replaced.
	Resolve string
}

// BenchResult is what a run reports, as one JSON object on stdout.
type BenchResult struct {
	Servers      []string `json:"servers"`
	Connections  int      `json:"connections"`
	Seconds      float64  `json:"seconds"`
	Gets         int      `json:"gets"`
	Sets         int      `json:"sets"`
	Hits         int      `json:"hits"`
	Errors       int      `json:"errors"`
	FirstError   string   `json:"firstError,omitempty"`
	OpsPerSecond float64  `json:"opsPerSecond"`
	// Latencies of the operations that succeeded, in microseconds.
	P50Micros  float64 `json:"p50Micros"`
	P99Micros  float64 `json:"p99Micros"`
	P999Micros float64 `json:"p999Micros"`
	MaxMicros  float64 `json:"maxMicros"`
}

// parseBench reads the bench subcommand's flags.
func parseBench(args []string, server string) (benchConfig, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := benchConfig{}
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to measure (at most 5m)")
	fs.IntVar(&c.Connections, "connections", 8, "concurrent connections, each one operation at a time (at most 64)")
	fs.IntVar(&c.Keys, "keys", 10_000, "distinct keys, all written before the measurement")
	fs.IntVar(&c.ValueSize, "value-size", 100, "bytes per value")
	fs.Float64Var(&c.GetRatio, "get-ratio", 0.9, "share of gets among the operations; the rest are sets")
	servers := fs.String("servers", "", "comma-separated host:port list (status.serverList) instead of -server's addresses")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("bench: %w", err)
	}
	switch {
	case c.Duration <= 0 || c.Duration > maxBenchDuration:
		return c, fmt.Errorf("bench -duration %v: want more than 0 and at most %v", c.Duration, maxBenchDuration)
	case c.Connections < 1 || c.Connections > maxBenchConnections:
		return c, fmt.Errorf("bench -connections %d: want 1 to %d", c.Connections, maxBenchConnections)
	case c.Keys < 1 || c.Keys > maxBenchKeys:
		return c, fmt.Errorf("bench -keys %d: want 1 to %d", c.Keys, maxBenchKeys)
	case c.ValueSize < 1 || c.ValueSize > maxBenchValueSize:
		return c, fmt.Errorf("bench -value-size %d: want 1 to %d", c.ValueSize, maxBenchValueSize)
	case c.GetRatio < 0 || c.GetRatio > 1:
		return c, fmt.Errorf("bench -get-ratio %v: want 0 to 1", c.GetRatio)
	}
	if *servers != "" {
		c.Servers = strings.Split(*servers, ",")
		return c, nil
	}
	addrs, err := resolve(server)
	if err != nil {
		return c, err
	}
	c.Servers, c.Resolve = addrs, server
	return c, nil
}

// serverSet hands out the servers to connect to, looking the name up again
// at most once a second when the run follows one.
type serverSet struct {
	mu     sync.Mutex
	list   []string
	name   string
	looked time.Time
}

func (s *serverSet) pick(i int, again bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if again && s.name != "" && time.Since(s.looked) > time.Second {
		s.looked = time.Now()
		if l, err := resolve(s.name); err == nil && len(l) > 0 {
			s.list = l
		}
	}
	return s.list[i%len(s.list)]
}

// resolve turns host:port into one address per IP the host resolves to,
// sorted, as runAll picks servers.
func resolve(server string) ([]string, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil, fmt.Errorf("-server %q: want host:port", server)
	}
	ips, err := net.LookupHost(host)
	if err != nil {
		return nil, err
	}
	slices.Sort(ips)
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip, port)
	}
	return out, nil
}

// runBench writes every key once, then runs the mix of gets and sets on
// c.Connections connections for c.Duration and reports throughput and the
// latency of each operation as the client saw it: the round trip plus
// TLS, the network and the server's work.
func runBench(d *dialer, c benchConfig) (BenchResult, error) {
	value := strings.Repeat("v", c.ValueSize)
	if err := preload(d, c, value); err != nil {
		return BenchResult{}, err
	}
	type worker struct {
		latencies               []time.Duration
		gets, sets, hits, fails int
		firstErr                error
	}
	workers := make([]worker, c.Connections)
	servers := &serverSet{list: c.Servers, name: c.Resolve, looked: time.Now()}
	start := time.Now()
	deadline := start.Add(c.Duration)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			w := &workers[i]
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			next, failed := i, false
			var bc *benchConn
			for time.Now().Before(deadline) {
				if bc == nil {
					var err error
					if bc, err = dialBench(d, servers.pick(next, failed)); err != nil {
						w.fails++
						if w.firstErr == nil {
							w.firstErr = err
						}
						next, failed = next+1, true
						time.Sleep(10 * time.Millisecond)
						continue
					}
				}
				key := benchKey(rng.IntN(c.Keys))
				get := rng.Float64() < c.GetRatio
				t0 := time.Now()
				hit, err := bc.do(get, key, value)
				if err != nil {
					w.fails++
					if w.firstErr == nil {
						w.firstErr = err
					}
					_ = bc.conn.Close()
					bc, failed = nil, true
					next++
					continue
				}
				w.latencies = append(w.latencies, time.Since(t0))
				if get {
					w.gets++
					if hit {
						w.hits++
					}
				} else {
					w.sets++
				}
			}
			if bc != nil {
				_ = bc.conn.Close()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := BenchResult{Servers: c.Servers, Connections: c.Connections, Seconds: elapsed.Seconds()}
	var all []time.Duration
	for _, w := range workers {
		res.Gets += w.gets
		res.Sets += w.sets
		res.Hits += w.hits
		res.Errors += w.fails
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
		all = append(all, w.latencies...)
	}
	res.OpsPerSecond = float64(res.Gets+res.Sets) / elapsed.Seconds()
	slices.Sort(all)
	res.P50Micros, res.P99Micros, res.P999Micros = micros(quantile(all, 0.5)), micros(quantile(all, 0.99)), micros(quantile(all, 0.999))
	if len(all) > 0 {
		res.MaxMicros = micros(all[len(all)-1])
	}
	return res, nil
}

// preload writes every key, so that the measured gets hit.
func preload(d *dialer, c benchConfig, value string) error {
	// One connection per server, side by side: each writes the keys that
	// go round-robin to its server.
	errs := make([]error, len(c.Servers))
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Go(func() {
			bc, err := dialBench(d, s)
			if err != nil {
				errs[i] = fmt.Errorf("bench: %w", err)
				return
			}
			defer func() { _ = bc.conn.Close() }()
			for k := i; k < c.Keys; k += len(c.Servers) {
				if _, err := bc.do(false, benchKey(k), value); err != nil {
					errs[i] = fmt.Errorf("bench: write the keys to %s: %w", s, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func benchKey(i int) string { return "bench-" + strconv.Itoa(i) }

// benchConn is one connection of the benchmark, without deadlines per
// operation (a stalled server shows as latency; the run's end closes it).
type benchConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialBench(d *dialer, addr string) (*benchConn, error) {
	conn, r, err := d.dial(addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &benchConn{conn: conn, r: r, w: bufio.NewWriter(conn)}, nil
}

// do runs one get or set and reports whether a get hit.
func (bc *benchConn) do(get bool, key, value string) (bool, error) {
	if get {
		fmt.Fprintf(bc.w, "get %s\r\n", key)
	} else {
		fmt.Fprintf(bc.w, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value)
	}
	if err := bc.w.Flush(); err != nil {
		return false, err
	}
	line, err := bc.r.ReadString('\n')
	if err != nil {
		return false, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !get {
		if line != "STORED" {
			return false, fmt.Errorf("set %s: %s", key, line)
		}
		return false, nil
	}
	if line == "END" {
		return false, nil
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "VALUE" {
		return false, fmt.Errorf("get %s: %s", key, line)
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return false, fmt.Errorf("get %s: %s", key, line)
	}
	// The value, its CRLF and the END line.
	if _, err := bc.r.Discard(n + 2); err != nil {
		return false, err
	}
	if end, err := bc.r.ReadString('\n'); err != nil || strings.TrimRight(end, "\r\n") != "END" {
		return false, errors.Join(err, fmt.Errorf("get %s: no END after the value", key))
	}
	return true, nil
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func micros(d time.Duration) float64 { return float64(d.Microseconds()) }

// bench is the bench subcommand: its exit code.
func bench(d *dialer, server string, args []string) int {
	c, err := parseBench(args, server)
	if err == nil {
		var res BenchResult
		if res, err = runBench(d, c); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(res)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "memcached-cli: %v\n", err)
		return 2
	}
	return 0
}
