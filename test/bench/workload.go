package bench

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/load"
)

// Clients is how many concurrent clients create the benchmark's objects.
const Clients = 16

const namespace = "bench"

var memcachedGVR = load.MemcachedGVR

// createConcurrently runs create(i) for i in [0, n) on Clients goroutines.
func createConcurrently(cfg *rest.Config, n int, create func(c client.Client, i int) error) error {
	return load.CreateConcurrently(cfg, Clients, n, create)
}

// seedMemcached is the tutorial's CR with a benchmark name.
func seedMemcached(i int) *unstructured.Unstructured {
	return load.Memcached(namespace, crName(i), 3)
}

// crName is the name of the i-th CR of a run.
func crName(i int) string { return fmt.Sprintf("mc-%05d", i) }

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
