package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMemcached serves set and get of memcached's text protocol from a map
// on 127.0.0.1, closing every connection after closeAfter commands (0:
// never), as a pod that goes away would.
func fakeMemcached(t *testing.T, closeAfter int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	items := map[string]string{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				r := bufio.NewReader(conn)
				for n := 1; closeAfter == 0 || n <= closeAfter; n++ {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line)
					switch {
					case len(f) == 5 && f[0] == "set":
						size, _ := strconv.Atoi(f[4])
						buf := make([]byte, size+2)
						if _, err := r.Read(buf); err != nil {
							return
						}
						mu.Lock()
						items[f[1]] = string(buf[:size])
						mu.Unlock()
						fmt.Fprint(conn, "STORED\r\n")
					case len(f) == 2 && f[0] == "get":
						mu.Lock()
						v, ok := items[f[1]]
						mu.Unlock()
						if ok {
							fmt.Fprintf(conn, "VALUE %s 0 %d\r\n%s\r\n", f[1], len(v), v)
						}
						fmt.Fprint(conn, "END\r\n")
					default:
						fmt.Fprint(conn, "ERROR\r\n")
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestBenchMeasuresEveryOperation(t *testing.T) {
	addr := fakeMemcached(t, 0)
	d, err := newDialer(addr, time.Second, "", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := runBench(d, benchConfig{Duration: 200 * time.Millisecond, Connections: 3, Keys: 50, ValueSize: 10, GetRatio: 0.5, Servers: []string{addr, addr}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Gets == 0 || res.Sets == 0 || res.Errors != 0 {
		t.Fatalf("gets %d sets %d errors %d (%s), want both kinds and no error", res.Gets, res.Sets, res.Errors, res.FirstError)
	}
	if res.Hits != res.Gets {
		t.Errorf("%d of %d gets hit: every key was written before the measurement", res.Hits, res.Gets)
	}
	if !(res.P50Micros <= res.P99Micros && res.P99Micros <= res.P999Micros && res.P999Micros <= res.MaxMicros) || res.OpsPerSecond <= 0 {
		t.Errorf("percentiles out of order or no throughput: %+v", res)
	}
}

// A server that drops connections costs errors, counted, and the run goes
// on over new connections.
func TestBenchCountsDroppedConnections(t *testing.T) {
	flaky := fakeMemcached(t, 20)
	d, err := newDialer(flaky, time.Second, "", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := runBench(d, benchConfig{Duration: 200 * time.Millisecond, Connections: 2, Keys: 5, ValueSize: 3, GetRatio: 0, Servers: []string{flaky}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Sets <= 20 || res.FirstError == "" {
		t.Errorf("sets %d, errors %d (%q): want the dropped connections counted and the run going on", res.Sets, res.Errors, res.FirstError)
	}
}

func TestBenchIsBounded(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "6m"}, {"-duration", "0s"}, {"-connections", "65"}, {"-connections", "0"},
		{"-keys", "0"}, {"-keys", "2000000"}, {"-value-size", "0"}, {"-get-ratio", "1.5"},
	} {
		if _, err := parseBench(append(args, "-servers", "127.0.0.1:1"), "localhost:11211"); err == nil {
			t.Errorf("bench %v: accepted", args)
		} else if !strings.Contains(err.Error(), args[0]) {
			t.Errorf("bench %v: %v does not name the flag", args, err)
		}
	}
	c, err := parseBench([]string{"-servers", "10.0.0.1:11211,10.0.0.2:11211"}, "localhost:11211")
	if err != nil || len(c.Servers) != 2 || c.Duration != 10*time.Second {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}
