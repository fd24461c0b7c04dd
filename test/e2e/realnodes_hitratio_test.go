package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/ring"
)

// The hit-ratio measurement: how many keys a cache keeps through the
// events of its life, for each way of running it, measured on real nodes
// with a client that shards keys over status.serverList on a ketama ring
// (package ring) and follows the list as a client's config generator would
// (every 200 ms). Before each event the client writes hitRatioKeys keys;
// during it, a reader gets keys in a loop and counts errors (anything but
// a hit or a miss); after it, the client reads every key back.

const hitRatioKeys = 10000

// ringMode is one way of running the cache.
type ringMode struct {
	name, memcached string
	spec            string // the spec's JSON, without size
}

// hitRatioRow is one event of one mode.
type hitRatioRow struct {
	Mode, Event              string
	HitRatio                 float64
	Errors, Misses, Requests int64
	Took                     time.Duration
	// FirstError is the first error a read met during the event.
	FirstError string
	// Trace is what explains the row when a check fails: when the client
	// changed its ring, and the logs of the event's pods, old and new.
	Trace string
}

// hitRatioModes: minReadySeconds 2 keeps the run short. drainSeconds is
// the default (5 s), as a user's cache has it: the drain must outlast the
// operator's serverList update plus the client's 200 ms refresh, and on
// the loaded CI machine the update alone took over 3 s (a 2 s drain let
// memcached stop before the client had left it: 361 connection resets).
func hitRatioModes() []ringMode {
	const rollout = `"highAvailability":{"minReadySeconds":2},"memcached":{"maxMemoryMB":64`
	return []ringMode{
		{"Ephemeral", "ring-ephemeral", `{` + rollout + `}}`},
		{"Stable", "ring-stable", `{"identity":"Stable",` + rollout + `}}`},
		{"Stable + warm restart", "ring-warm", `{"identity":"Stable",` + rollout + `,"warmRestart":{"enabled":true,"storageClassName":"memcached-ram"}}}`},
	}
}

// hitRatioOnRealNodes runs every mode at once, each on its own Memcached,
// and returns the table.
func hitRatioOnRealNodes(t *testing.T, k *cluster.Local, c client.Client, rebuiltImage string) []hitRatioRow {
	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin []byte, args ...string) string {
		t.Helper()
		return cluster.Run(t, k.Kubeconfig, stdin, bins["kubectl"], args...)
	}
	ramVolumes(t, kubectl)
	resolver := clusterResolver(t, c)
	follow := func(pods []string) (stop func() string) { return followLogs(k.Kubeconfig, bins["kubectl"], pods) }

	var mu sync.Mutex
	var rows []hitRatioRow
	t.Run("hit ratio", func(t *testing.T) {
		for _, mode := range hitRatioModes() {
			t.Run(mode.name, func(t *testing.T) {
				t.Parallel()
				got := measureMode(t, c, kubectl, follow, resolver, mode, rebuiltImage)
				mu.Lock()
				rows = append(rows, got...)
				mu.Unlock()
			})
		}
	})
	order := map[string]int{}
	for i, m := range hitRatioModes() {
		order[m.name] = i
	}
	slices.SortStableFunc(rows, func(a, b hitRatioRow) int { return order[a.Mode] - order[b.Mode] })
	return rows
}

// ramVolumes makes the StorageClass memcached-ram: local volumes on the
// machine's tmpfs (/dev/shm), two per node, each pinned to its node as a
// local volume is, statically provisioned. memcached wants its memory file
// on a RAM disk; this is the simplest class that gives one and outlives a
// pod.
func ramVolumes(t *testing.T, kubectl func([]byte, ...string) string) {
	root, err := os.MkdirTemp("/dev/shm", "memcached-ram-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	var objects strings.Builder
	objects.WriteString(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: memcached-ram}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
`)
	for i := range 6 {
		dir := filepath.Join(root, fmt.Sprintf("pv-%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&objects, `---
apiVersion: v1
kind: PersistentVolume
metadata: {name: memcached-ram-%d}
spec:
  capacity: {storage: 128Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: memcached-ram
  local: {path: %s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-%d]}]
`, i, dir, i%3+1)
	}
	kubectl([]byte(objects.String()), "apply", "-f", "-")
	t.Cleanup(func() {
		args := []string{"delete", "storageclass/memcached-ram", "--ignore-not-found", "--wait=false"}
		for i := range 6 {
			args = append(args, fmt.Sprintf("pv/memcached-ram-%d", i))
		}
		kubectl(nil, args...)
	})
}

// clusterResolver resolves names through the cluster's CoreDNS, dialled
// at its pod's address, as a pod's resolver would reach it through the
// kube-dns Service.
func clusterResolver(t *testing.T, c client.Client) *net.Resolver {
	pods := &corev1.PodList{}
	if err := c.List(context.Background(), pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-dns"}); err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && podReady(p) {
			addr = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(buildcluster.CoreDNSPort))
		}
	}
	if addr == "" {
		t.Fatal("no ready CoreDNS pod")
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, network, addr)
	}}
}

// ringClient follows one Memcached's status.serverList.
type ringClient struct {
	c        client.Client
	name     string
	resolver *net.Resolver
	conns    *ring.Conns

	mu     sync.Mutex
	listed []string          // the last status.serverList seen
	ring   *ring.Ring        // over the listed servers it can reach
	addrs  map[string]string // server in the ring to its address
	left   map[string]string // name that left the list to its last address
	trace  strings.Builder   // when the ring changed, and to what
}

// follow refreshes the ring every 200 ms until ctx ends.
func (rc *ringClient) follow(ctx context.Context) {
	for {
		rc.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// refresh rebuilds the ring from status.serverList as a careful config
// generator would. A server that leaves the list leaves the ring at
// once: it is draining, and it stops when the drain ends. A server that
// joins enters the ring once its name resolves, which can come after it
// is listed (the EndpointSlice and CoreDNS follow the pod on their own).
// A name that comes back (Stable: a replaced pod) enters only once it
// resolves to a new address: CoreDNS's cache answers with the old pod's
// address for the record's TTL (5 s) after it last did.
func (rc *ringClient) refresh(ctx context.Context) {
	mc, err := cluster.Memcached(rc.c, "default", rc.name)
	if err != nil {
		return
	}
	listed, _, _ := unstructured.NestedStringSlice(mc.Object, "status", "serverList")
	rc.mu.Lock()
	current, left := maps.Clone(rc.addrs), maps.Clone(rc.left)
	rc.mu.Unlock()
	var servers []string
	addrs := map[string]string{}
	for _, s := range listed {
		addr, resolved := rc.resolve(ctx, s)
		switch {
		case resolved && addr != left[s]:
		case current[s] != "":
			// Listed and in the ring: a failed lookup changes nothing.
			addr = current[s]
		default:
			continue
		}
		servers = append(servers, s)
		addrs[s] = addr
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.left == nil {
		rc.left = map[string]string{}
	}
	for s, addr := range rc.addrs {
		if _, kept := addrs[s]; !kept && s != addr {
			// A name: an address entry (Ephemeral) is its own pod.
			rc.left[s] = addr
		}
	}
	for s := range addrs {
		delete(rc.left, s)
	}
	if rc.ring == nil || !slices.Equal(rc.ring.Servers(), servers) || !maps.Equal(rc.addrs, addrs) {
		fmt.Fprintf(&rc.trace, "%s client ring %v of listed %v\n", time.Now().UTC().Format(time.RFC3339Nano), addrs, listed)
	}
	if rc.ring == nil || !slices.Equal(rc.ring.Servers(), servers) {
		rc.ring = ring.New(servers)
	}
	rc.listed, rc.addrs = listed, addrs
}

// resolve is where a server list entry points: itself when it is an
// address, else what its name resolves to through the cluster's DNS.
func (rc *ringClient) resolve(ctx context.Context, entry string) (string, bool) {
	host, port, err := net.SplitHostPort(entry)
	if err != nil {
		return "", false
	}
	if net.ParseIP(host) != nil {
		return entry, true
	}
	lookup, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ips, err := rc.resolver.LookupHost(lookup, host+"."+buildcluster.ClusterDomain)
	if err != nil || len(ips) == 0 {
		return "", false
	}
	return net.JoinHostPort(ips[0], port), true
}

// takeTrace returns the ring changes since the last call.
func (rc *ringClient) takeTrace() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := rc.trace.String()
	rc.trace.Reset()
	return s
}

// followLogs follows the logs of every container of the pods named, with
// kubectl logs -f, until each pod is gone or stop is called; stop returns
// what they printed. A pod that stops during an event says there what it
// did on its way out (the reloader's warm stop, memcached's exit).
func followLogs(kubeconfig, kubectl string, pods []string) (stop func() string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var out strings.Builder
	var running sync.WaitGroup
	for _, pod := range pods {
		running.Go(func() {
			cmd := exec.CommandContext(ctx, kubectl, "logs", "--follow", "--all-containers", "--prefix", "--timestamps", "--namespace=default", "pod/"+pod)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
			got, _ := cmd.CombinedOutput()
			mu.Lock()
			out.Write(got)
			mu.Unlock()
		})
	}
	return func() string {
		cancel()
		running.Wait()
		return out.String()
	}
}

// addr is where key goes now: the address of its server, or "" when the
// list is empty.
func (rc *ringClient) addr(key string) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.ring == nil {
		return ""
	}
	return rc.addrs[rc.ring.Server(key)]
}

var errNoServer = errors.New("no server for the key: the list is empty")

func (rc *ringClient) set(key string) error {
	addr := rc.addr(key)
	if addr == "" {
		return errNoServer
	}
	return rc.conns.Set(addr, key, "v-"+key)
}

func (rc *ringClient) get(key string) error {
	addr := rc.addr(key)
	if addr == "" {
		return errNoServer
	}
	v, err := rc.conns.Get(addr, key)
	if err == nil && v != "v-"+key {
		return fmt.Errorf("%s holds %q", key, v)
	}
	return err
}

func ringKey(i int) string { return "key-" + strconv.Itoa(i) }

// measureMode creates the mode's Memcached and runs the events on it.
func measureMode(t *testing.T, c client.Client, kubectl func([]byte, ...string) string, follow func([]string) func() string, resolver *net.Resolver, mode ringMode, rebuiltImage string) []hitRatioRow {
	name := mode.memcached
	kubectl([]byte(fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: %s, namespace: default}
spec: %s
`, name, strings.Replace(mode.spec, "{", `{"size":3,`, 1))), "apply", "--server-side", "-f", "-")
	t.Cleanup(func() { kubectl(nil, "delete", "memcached/"+name, "--ignore-not-found", "--wait", "--timeout=120s") })
	cluster.WaitMemcachedReady(t, c, "default", name, 3)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := &ringClient{c: c, name: name, resolver: resolver, conns: ring.NewConns()}
	defer rc.conns.Close()
	waitServers(t, rc, 3)
	go rc.follow(ctx)

	selector := "app.kubernetes.io/instance=" + name
	events := []struct {
		name string
		run  func()
	}{
		{"replace one pod", func() {
			victim := pods(t, c, selector)[0]
			for _, p := range pods(t, c, selector) {
				if p.Name == name+"-1" || (victim.Name != name+"-1" && p.Name < victim.Name) {
					victim = p
				}
			}
			kubectl(nil, "delete", "pod", victim.Name, "--wait=false")
			waitReplaced(t, c, selector, map[string]bool{string(victim.UID): true}, 3, "")
		}},
		{"rollout (image change)", func() {
			before := map[string]bool{}
			for _, p := range pods(t, c, selector) {
				before[string(p.UID)] = true
			}
			kubectl(nil, "patch", "memcached/"+name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"image":%q}}`, rebuiltImage))
			waitReplaced(t, c, selector, before, 3, rebuiltImage)
		}},
		{"scale 3→4", func() {
			kubectl(nil, "scale", "memcached/"+name, "--replicas=4")
			waitReplaced(t, c, selector, nil, 4, "")
		}},
		{"scale 4→3", func() {
			kubectl(nil, "scale", "memcached/"+name, "--replicas=3")
			waitReplaced(t, c, selector, nil, 3, "")
			if strings.HasPrefix(mode.name, "Stable") {
				// The StatefulSet removes the highest ordinal: the
				// servers that stay are the ones clients hash to.
				var left []string
				for _, p := range pods(t, c, selector) {
					left = append(left, p.Name)
				}
				slices.Sort(left)
				if want := []string{name + "-0", name + "-1", name + "-2"}; !slices.Equal(left, want) {
					t.Errorf("after scaling 4→3 the pods are %v, want %v", left, want)
				}
			}
		}},
	}
	var rows []hitRatioRow
	for _, ev := range events {
		for i := range hitRatioKeys {
			if err := rc.set(ringKey(i)); err != nil {
				t.Fatalf("%s: write %s: %v", mode.name, ringKey(i), err)
			}
		}
		var requests, misses, errs atomic.Int64
		var firstErr atomic.Value
		stop := make(chan struct{})
		var reader sync.WaitGroup
		reader.Go(func() {
			r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // which keys to read
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := rc.get(ringKey(r.IntN(hitRatioKeys)))
				requests.Add(1)
				switch {
				case errors.Is(err, ring.ErrMiss):
					misses.Add(1)
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
		var before []string
		for _, p := range pods(t, c, selector) {
			before = append(before, p.Name)
		}
		stopLogs := follow(before)
		rc.takeTrace()
		start := time.Now()
		ev.run()
		took := time.Since(start)
		close(stop)
		reader.Wait()
		trace := rc.takeTrace() + stopLogs()
		// What the cache kept, not how soon DNS follows: a replaced pod's
		// name can still resolve to its old address (or not at all) for
		// a few seconds, and a client reading meanwhile would count the
		// unreachable server's keys as lost.
		waitClientCurrent(t, c, rc, selector)
		hits, lostTo := 0, map[string]int{}
		for i := range hitRatioKeys {
			switch err := rc.get(ringKey(i)); {
			case err == nil:
				hits++
			case !errors.Is(err, ring.ErrMiss):
				lostTo[err.Error()]++
			}
		}
		if len(lostTo) > 0 {
			t.Errorf("%s, %s: reading the keys back failed (not missed): %v", mode.name, ev.name, lostTo)
		}
		row := hitRatioRow{Mode: mode.name, Event: ev.name, HitRatio: float64(hits) / hitRatioKeys,
			Errors: errs.Load(), Misses: misses.Load(), Requests: requests.Load(), Took: took, Trace: trace}
		if first, ok := firstErr.Load().(string); ok {
			row.FirstError = first
		}
		// The new pods' logs: memcached says whether it restored its
		// memory file.
		row.Trace += kubectl(nil, "logs", "--namespace=default", "--selector="+selector, "--all-containers", "--prefix", "--timestamps", "--max-log-requests=10")
		t.Logf("%s, %s: hit ratio %.3f after %v; during it %d reads, %d misses, %d errors %v",
			mode.name, ev.name, row.HitRatio, took.Round(100*time.Millisecond), row.Requests, row.Misses, row.Errors, firstErr.Load())
		rows = append(rows, row)
	}
	if mode.name == "Stable" {
		autoscaled(t, kubectl, name)
	}
	return rows
}

// autoscaled applies deploy/samples/memcached-hpa.yaml to the Memcached
// name and waits for the real HPA controller to reach its scale
// subresource (AbleToScale). Without a metrics API here it cannot
// compute a size, so it never changes one.
func autoscaled(t *testing.T, kubectl func([]byte, ...string) string, name string) {
	t.Helper()
	sample, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy", "samples", "memcached-hpa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hpa := strings.ReplaceAll(string(sample), "memcached-sample", name)
	kubectl([]byte(hpa), "apply", "-n", "default", "-f", "-")
	defer kubectl(nil, "delete", "-n", "default", "hpa/"+name, "--ignore-not-found")
	cluster.Eventually(t, waitFor, "the HorizontalPodAutoscaler to reach Memcached/"+name+"'s scale subresource", func() error {
		out := kubectl(nil, "get", "-n", "default", "hpa/"+name, "-o", `jsonpath={.status.conditions[?(@.type=="AbleToScale")].status} {.status.conditions[?(@.type=="AbleToScale")].reason}`)
		if !strings.HasPrefix(out, "True") {
			return fmt.Errorf("AbleToScale %q", out)
		}
		return nil
	})
}

// waitServers waits until rc's Memcached lists n servers that resolve.
func waitServers(t *testing.T, rc *ringClient, n int) {
	t.Helper()
	cluster.Eventually(t, waitFor, fmt.Sprintf("%s to list %d servers", rc.name, n), func() error {
		rc.refresh(context.Background())
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.listed) != n || len(rc.addrs) != n {
			return fmt.Errorf("servers %v, resolved %v", rc.listed, rc.addrs)
		}
		return nil
	})
}

// waitClientCurrent waits until rc lists every server of the Memcached's
// status.serverList at the address of one of its live, ready pods.
func waitClientCurrent(t *testing.T, c client.Client, rc *ringClient, selector string) {
	t.Helper()
	cluster.Eventually(t, waitFor, rc.name+": the client to resolve every server to a ready pod", func() error {
		rc.refresh(context.Background())
		ready := map[string]bool{}
		for _, p := range pods(t, c, selector) {
			if p.DeletionTimestamp == nil && podReady(p) {
				ready[p.Status.PodIP] = true
			}
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.ring == nil || !slices.Equal(rc.ring.Servers(), rc.listed) {
			return fmt.Errorf("the ring holds %v of the servers listed, %v", rc.addrs, rc.listed)
		}
		for _, s := range rc.ring.Servers() {
			host, _, err := net.SplitHostPort(rc.addrs[s])
			if err != nil || !ready[host] {
				return fmt.Errorf("%s resolves to %q, which is no ready pod's address", s, rc.addrs[s])
			}
		}
		return nil
	})
}

// waitReplaced waits until the pods of selector are n live, ready pods,
// none of them one of gone (UIDs), all running image when given, and the
// Memcached is Ready with n servers listed.
func waitReplaced(t *testing.T, c client.Client, selector string, gone map[string]bool, n int, image string) {
	t.Helper()
	name := strings.TrimPrefix(selector, "app.kubernetes.io/instance=")
	cluster.Eventually(t, 3*waitFor, fmt.Sprintf("%s: %d new ready pods", name, n), func() error {
		live := 0
		for _, p := range pods(t, c, selector) {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s still terminating", p.Name)
			}
			if gone[string(p.UID)] || !podReady(p) || (image != "" && p.Spec.Containers[0].Image != image) {
				return fmt.Errorf("pod %s not replaced and ready yet", p.Name)
			}
			live++
		}
		if live != n {
			return fmt.Errorf("%d live pods", live)
		}
		mc, err := cluster.Memcached(c, "default", name)
		if err != nil {
			return err
		}
		if servers, _, _ := unstructured.NestedStringSlice(mc.Object, "status", "serverList"); len(servers) != n {
			return fmt.Errorf("serverList %v", servers)
		}
		return cluster.MemcachedCondition(mc, "Ready", "True", "")
	})
}

// checkHitRatios holds the table to what the modes promise.
func checkHitRatios(t *testing.T, rows []hitRatioRow) {
	t.Helper()
	at := func(mode, event string) hitRatioRow {
		for _, r := range rows {
			if r.Mode == mode && r.Event == event {
				return r
			}
		}
		t.Fatalf("no row for %s, %s", mode, event)
		return hitRatioRow{}
	}
	for _, r := range rows {
		// The drain keeps a stopping pod serving until the client has
		// left it: a client sees misses, never errors.
		if r.Errors > 0 {
			t.Errorf("%s, %s: %d errors among %d reads (the first: %s): clients must see only misses\n%s", r.Mode, r.Event, r.Errors, r.Requests, r.FirstError, r.Trace)
		}
	}
	// Stable names: a replaced pod takes back its own keys, so only its
	// third is lost (2/3 kept, with the ring's unevenness).
	if r := at("Stable", "replace one pod"); r.HitRatio < 0.60 {
		t.Errorf("Stable, replace one pod: hit ratio %.3f, want about 2/3 (at least 0.60)\n%s", r.HitRatio, r.Trace)
	}
	for _, event := range []string{"replace one pod", "rollout (image change)"} {
		if r := at("Stable + warm restart", event); r.HitRatio < 0.90 {
			t.Errorf("Stable + warm restart, %s: hit ratio %.3f, want at least 0.90\n%s", event, r.HitRatio, r.Trace)
		}
	}
	for _, mode := range hitRatioModes() {
		for _, event := range []string{"scale 3→4", "scale 4→3"} {
			if r := at(mode.name, event); r.HitRatio < 0.60 {
				t.Errorf("%s, %s: hit ratio %.3f, want about 3/4 (at least 0.60)\n%s", mode.name, event, r.HitRatio, r.Trace)
			}
		}
	}
}

// hitRatioMarkdown renders the table as docs/hit-ratio.md.
func hitRatioMarkdown(rows []hitRatioRow, commit string, date time.Time) string {
	var b strings.Builder
	b.WriteString("<!-- Code generated by TestRealNodes (make hit-ratio); DO NOT EDIT. -->\n\n")
	b.WriteString("# Hit ratio through a cache's life\n\n")
	fmt.Fprintf(&b, "Measured %s on commit %s, on 3 real nodes (kubelet, containerd, runc) of the local cluster, with Debian's memcached.\n\n", date.UTC().Format("2006-01-02 15:04 MST"), commit)
	fmt.Fprintf(&b, "The client is test/internal/ring: a ketama consistent-hash ring (libketama's, as spymemcached and libmemcached use it) over `status.serverList`, refreshed every 200 ms. Before each event it writes %d keys; during the event a reader gets random keys in a loop; after it, the client reads every key back. Each Memcached has size 3, `drainSeconds: 5` (the default) and `minReadySeconds: 2`; warm restart keeps its memory file on local volumes on a tmpfs. How to read it and choose a mode: [docs/keeping-keys.md](keeping-keys.md).\n\n", hitRatioKeys)
	b.WriteString("| Mode | Event | Hit ratio after | Reads during | Misses during | Errors during | Took |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %.1f%% | %d | %d | %d | %.1f s |\n", r.Mode, r.Event, 100*r.HitRatio, r.Requests, r.Misses, r.Errors, r.Took.Seconds())
	}
	return b.String()
}
