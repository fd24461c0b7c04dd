package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
)

// Clients is how many concurrent clients create the benchmark's objects.
const Clients = 16

const namespace = "bench"

var memcachedGVR = schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}

// unthrottled is cfg without client-side rate limiting: the harness must
// not be the bottleneck it measures.
func unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

// createConcurrently runs create(i) for i in [0, n) on Clients goroutines,
// each with its own client, and returns the first error.
func createConcurrently(cfg *rest.Config, n int, create func(c client.Client, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, Clients)
	for w := range Clients {
		c, err := client.New(unthrottled(cfg), client.Options{Scheme: cluster.Scheme})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
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
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seedMemcached is the tutorial's CR with a benchmark name.
func seedMemcached(i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": fmt.Sprintf("mc-%05d", i), "namespace": namespace},
		"spec":       map[string]any{"size": int64(3)},
	}}
	return u
}

// ownedTemplates are the objects our operator created for one Memcached,
// reduced to what a client would send: the raw write floor creates exactly
// these, renamed, for every CR.
type ownedTemplates struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        client.Object
}

func (t ownedTemplates) instantiate(i int) []client.Object {
	name := fmt.Sprintf("mc-%05d", i)
	var out []client.Object
	for _, src := range []client.Object{t.deployment, t.service, t.pdb} {
		o := src.DeepCopyObject().(client.Object)
		o.SetName(name)
		o.SetNamespace(namespace)
		o.SetOwnerReferences(nil)
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetCreationTimestamp(metav1.Time{})
		o.SetManagedFields(nil)
		o.SetGeneration(0)
		out = append(out, o)
	}
	return out
}

// convergence watches a namespace's objects of one resource and reports
// when n of them satisfy done. It lists then watches, re-listing when a
// watch ends, so it costs the apiserver a handful of requests however long
// the run.
type convergence struct {
	mu    sync.Mutex
	state map[string]bool
	n     int
	ready chan struct{}
	once  sync.Once
}

func watchConvergence(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, n int, done func(*unstructured.Unstructured) bool) (*convergence, error) {
	dyn, err := dynamic.NewForConfig(unthrottled(cfg))
	if err != nil {
		return nil, err
	}
	c := &convergence{state: map[string]bool{}, n: n, ready: make(chan struct{})}
	res := dyn.Resource(gvr).Namespace(namespace)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		c.set(list.Items[i].GetName(), done(&list.Items[i]))
	}
	rv := list.GetResourceVersion()
	go func() {
		for ctx.Err() == nil {
			w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				switch ev.Type {
				case watch.Added, watch.Modified:
					c.set(u.GetName(), done(u))
				case watch.Deleted:
					c.set(u.GetName(), false)
				}
			}
		}
	}()
	return c, nil
}

func (c *convergence) set(name string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state[name] = ok
	count := 0
	for _, v := range c.state {
		if v {
			count++
		}
	}
	if count >= c.n {
		c.once.Do(func() { close(c.ready) })
	}
}

func (c *convergence) converged() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := 0
	for _, v := range c.state {
		if v {
			count++
		}
	}
	return count
}

// observedCurrent is our operator's convergence: it has reported on the
// current generation (it writes status after applying every owned object).
func observedCurrent(u *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return u.GetGeneration() > 0 && gen == u.GetGeneration()
}

// deploymentAtSize is the seed's convergence: its only output exists with
// the wanted replicas.
func deploymentAtSize(u *unstructured.Unstructured) bool {
	r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return r == 3
}
