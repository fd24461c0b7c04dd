package bench

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return load.Memcached(namespace, fmt.Sprintf("mc-%05d", i), 3)
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
