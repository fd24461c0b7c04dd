package memcached_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/proc"
)

// The memory the operator gives a memcached container by default (its
// request and limit, MinimumMemoryMiB) holds the worst the process can do
// with its settings: the cache full of the smallest items (the hash table
// at its largest) and every connection it accepts busy in the middle of a
// request (each holding a read buffer). A model that is too small would
// have the kernel OOM-kill the cache in production.
func TestMemoryStaysWithinTheRequest(t *testing.T) {
	h := startHarness(t, "memory")
	ctx := context.Background()
	for _, c := range []struct{ memory, connections, threads int32 }{
		{64, 1024, 4}, // the defaults
		{32, 4096, 4},
		{8, 2048, 1},
	} {
		name := fmt.Sprintf("m%d-c%d-t%d", c.memory, c.connections, c.threads)
		t.Run(name, func(t *testing.T) {
			mc := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.namespace},
				Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Memcached: &cachev1alpha1.MemcachedConfig{
					MaxMemoryMB: ptr.To(c.memory), MaxConnections: ptr.To(c.connections), Threads: ptr.To(c.threads),
				}},
			}
			if err := h.c.Create(ctx, mc); err != nil {
				t.Fatal(err)
			}
			d, err := h.waitDeployment(ctx, mc, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			main := container(d.Spec.Template.Spec, "memcached")
			limit := main.Resources.Limits[corev1.ResourceMemory]
			limitMiB := float64(limit.Value()) / (1 << 20)
			srv := memcached.Start(t, main.Args, memcached.Identity{UID: 11211, GID: 11211})

			peak := 0.0
			sample := func() {
				if rss, err := proc.RSSMiB(srv.PID()); err == nil && rss > peak {
					peak = rss
				}
			}
			items, evictions := fill(t, srv.Addr, sample)
			busy := holdBusyConnections(t, srv.Addr, int(c.connections-5*c.threads-20))
			time.Sleep(500 * time.Millisecond)
			sample()
			t.Logf("%s: %d items (%d evicted), %d busy connections: peak RSS %.1f MiB of the %.0f MiB limit", name, items, evictions, busy, peak, limitMiB)
			if peak > limitMiB {
				t.Errorf("memcached reached %.1f MiB, above the %.0f MiB the operator gives it (MinimumMemoryMiB)", peak, limitMiB)
			}
		})
	}
}

// fill stores the smallest items until the cache evicts, then as many again,
// so that the hash table grows to its largest.
func fill(t *testing.T, addr string, sample func()) (items, evictions int64) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	w := bufio.NewWriterSize(conn, 1<<20)
	r := bufio.NewReader(conn)
	key := 0
	for round := 0; round < 200; round++ {
		for range 50000 {
			key++
			fmt.Fprintf(w, "set %x 0 0 1 noreply\r\nx\r\n", key)
		}
		stats := statsOf(t, w, r)
		sample()
		evictions, items = stats["evictions"], stats["curr_items"]
		if evictions > 0 && evictions > items {
			return items, evictions
		}
	}
	t.Fatalf("no evictions after %d sets: the cache never filled", key)
	return 0, 0
}

func statsOf(t *testing.T, w *bufio.Writer, r *bufio.Reader) map[string]int64 {
	t.Helper()
	if _, err := io.WriteString(w, "stats\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimSpace(line)
		if line == "END" {
			return out
		}
		if f := strings.Fields(line); len(f) == 3 && f[0] == "STAT" {
			n, _ := strconv.ParseInt(f[2], 10, 64)
			out[f[1]] = n
		}
	}
}

// holdBusyConnections opens n connections, each halfway through sending a
// large value, so memcached holds a read buffer for every one. They close
// when the test ends.
func holdBusyConnections(t *testing.T, addr string, n int) int {
	t.Helper()
	partial := "set busy 0 0 100000\r\n" + strings.Repeat("b", 8000)
	opened := 0
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", opened+1, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := io.WriteString(conn, partial); err != nil {
			t.Fatalf("connection %d: %v", opened+1, err)
		}
		opened++
	}
	return opened
}
