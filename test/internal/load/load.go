// Package load drives and observes many Memcacheds at once, for the
// harnesses that measure the operator (test/bench) and break its world
// (test/chaos): concurrent creation, a list+watch convergence tracker that
// survives control-plane restarts, the controller's own Prometheus metrics,
// and the machine and versions a report names.
package load

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
)

// MemcachedGVR is the Memcached resource.
var MemcachedGVR = schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}

// Unthrottled is cfg without client-side rate limiting: a harness must not
// be the bottleneck it measures.
func Unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

// CreateConcurrently runs create(i) for i in [0, n) on the given number of
// goroutines, each with its own client, and returns the first error of each.
func CreateConcurrently(cfg *rest.Config, clients, n int, create func(c client.Client, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for w := range clients {
		c, err := client.New(Unthrottled(cfg), client.Options{Scheme: cluster.Scheme})
		if err != nil {
			return err
		}
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := create(c, i); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Memcached is a Memcached of the given size, unstructured as clients send it.
func Memcached(namespace, name string, size int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"size": int64(size)},
	}}
}

// Convergence tracks, for one resource in one namespace, which objects
// satisfy a predicate. It lists then watches, and lists again whenever a
// watch fails (an apiserver restart, a compacted resourceVersion), so it
// costs the apiserver a handful of requests however long the run, and it
// keeps working across control-plane outages.
type Convergence struct {
	mu    sync.Mutex
	state map[string]bool
	// why summarizes the status of each object that does not satisfy the
	// predicate, for Pending.
	why   map[string]string
	n     int
	ready chan struct{}
	once  sync.Once
	done  func(*unstructured.Unstructured) bool
}

// WatchConvergence starts tracking until ctx ends. Ready is closed once n
// objects satisfy done at the same time.
func WatchConvergence(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string, n int, done func(*unstructured.Unstructured) bool) (*Convergence, error) {
	dyn, err := dynamic.NewForConfig(Unthrottled(cfg))
	if err != nil {
		return nil, err
	}
	c := &Convergence{state: map[string]bool{}, why: map[string]string{}, n: n, ready: make(chan struct{}), done: done}
	res := dyn.Resource(gvr).Namespace(namespace)
	rv, err := c.relist(ctx, res)
	if err != nil {
		return nil, err
	}
	go func() {
		for ctx.Err() == nil {
			if rv == "" {
				if rv, err = c.relist(ctx, res); err != nil {
					rv = ""
					sleep(ctx, 250*time.Millisecond)
					continue
				}
			}
			w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				rv = ""
				sleep(ctx, 250*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				switch ev.Type {
				case watch.Added, watch.Modified:
					c.observe(u)
				case watch.Deleted:
					c.set(u.GetName(), false)
				}
			}
			w.Stop()
			// Whatever ended the watch, start again from a list: events may
			// have been missed.
			rv = ""
		}
	}()
	return c, nil
}

func (c *Convergence) relist(ctx context.Context, res dynamic.ResourceInterface) (string, error) {
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		seen[list.Items[i].GetName()] = true
		c.observe(&list.Items[i])
	}
	c.mu.Lock()
	for name := range c.state {
		if !seen[name] {
			delete(c.state, name)
		}
	}
	c.mu.Unlock()
	return list.GetResourceVersion(), nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// observe records whether u satisfies the predicate and, if not, what its
// status says.
func (c *Convergence) observe(u *unstructured.Unstructured) {
	ok := c.done(u)
	if !ok {
		why := statusSummary(u)
		c.mu.Lock()
		c.why[u.GetName()] = why
		c.mu.Unlock()
	}
	c.set(u.GetName(), ok)
}

// statusSummary is an object's status in one line: its ready replicas and
// its conditions that are not True, with their reasons.
func statusSummary(u *unstructured.Unstructured) string {
	ready, found, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	parts := []string{"no status"}
	if found || u.Object["status"] != nil {
		parts = []string{fmt.Sprintf("readyReplicas %d", ready)}
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Ready" || cond["status"] == "True" && cond["type"] != "Progressing" {
			msg := fmt.Sprint(cond["message"])
			if len(msg) > 120 {
				msg = msg[:120] + "..."
			}
			parts = append(parts, fmt.Sprintf("%v=%v %v: %s", cond["type"], cond["status"], cond["reason"], msg))
		}
	}
	return strings.Join(parts, "; ")
}

func (c *Convergence) set(name string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state[name] = ok
	if c.count() >= c.n {
		c.once.Do(func() { close(c.ready) })
	}
}

func (c *Convergence) count() int {
	n := 0
	for _, v := range c.state {
		if v {
			n++
		}
	}
	return n
}

// Ready is closed once n objects have satisfied the predicate together.
func (c *Convergence) Ready() <-chan struct{} { return c.ready }

// Converged is how many objects satisfy the predicate now.
func (c *Convergence) Converged() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count()
}

// Pending names up to max objects that do not satisfy the predicate now,
// for error messages.
func (c *Convergence) Pending(limit int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name, ok := range c.state {
		if !ok && len(out) < limit {
			out = append(out, name)
		}
	}
	return out
}

// pendingStatus is Pending with what each object's status says.
func (c *Convergence) pendingStatus(limit int) []string {
	names := c.Pending(limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, name := range names {
		names[i] = name + " (" + c.why[name] + ")"
	}
	return names
}

// Wait waits until all n objects satisfy the predicate at the same time,
// now: unlike Ready, which stays closed once they did.
func (c *Convergence) Wait(timeout time.Duration) error { return c.WaitN(c.n, timeout) }

// WaitN waits until k objects satisfy the predicate together.
func (c *Convergence) WaitN(k int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for c.Converged() < k {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d converged within %v; not converged: %s", c.Converged(), k, timeout, strings.Join(c.pendingStatus(5), ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Is tells whether the named object satisfies the predicate now.
func (c *Convergence) Is(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state[name]
}

// Versions names Go and the control plane's versions, from bin/.
func Versions() string {
	bins, err := repo.Bin("kube-apiserver", "etcd")
	if err != nil {
		return runtime.Version()
	}
	version := func(bin string, args ...string) string {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			return "?"
		}
		fields := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		if len(fields) == 0 {
			return "?"
		}
		return fields[len(fields)-1]
	}
	return fmt.Sprintf("%s, kube-apiserver %s, etcd %s, controller-runtime v0.25.2",
		runtime.Version(), version(bins["kube-apiserver"], "--version"), version(bins["etcd"], "--version"))
}

// Percentile of durations, by nearest rank (p=50 is the median, p=100 the
// maximum); 0 for none.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
