package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MemcachedTimeout is how long the Wait helpers below wait.
const MemcachedTimeout = 60 * time.Second

// Memcached reads a Memcached as the API serves it, unstructured, so that
// tests see exactly what clients see.
func Memcached(c client.Client, namespace, name string) (*unstructured.Unstructured, error) {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cache.example.com/v1alpha1")
	mc.SetKind("Memcached")
	err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, mc)
	return mc, err
}

// WaitMemcachedReady waits for the Memcached's own status to say size/size
// Ready for its current generation.
func WaitMemcachedReady(t testing.TB, c client.Client, namespace, name string, size int) {
	t.Helper()
	Eventually(t, MemcachedTimeout, fmt.Sprintf("Memcached %s/%s %d/%d Ready", namespace, name, size, size), func() error {
		mc, err := Memcached(c, namespace, name)
		if err != nil {
			return err
		}
		ready, _, _ := unstructured.NestedInt64(mc.Object, "status", "readyReplicas")
		if int(ready) != size {
			return fmt.Errorf("readyReplicas %d", ready)
		}
		return MemcachedCondition(mc, "Ready", "True", "")
	})
}

// WaitMemcachedCondition waits for a condition with the given reason.
func WaitMemcachedCondition(t testing.TB, c client.Client, namespace, name, condType, reason string) {
	t.Helper()
	Eventually(t, MemcachedTimeout, fmt.Sprintf("%s/%s %s %s", namespace, name, condType, reason), func() error {
		mc, err := Memcached(c, namespace, name)
		if err != nil {
			return err
		}
		return MemcachedCondition(mc, condType, "", reason)
	})
}

// MemcachedCondition checks that the status is of the object's current
// generation and has the condition with the status and reason ("" for any).
func MemcachedCondition(mc *unstructured.Unstructured, condType, status, reason string) error {
	gen, _, _ := unstructured.NestedInt64(mc.Object, "status", "observedGeneration")
	if gen != mc.GetGeneration() {
		return fmt.Errorf("observedGeneration %d of %d", gen, mc.GetGeneration())
	}
	conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		if cond["type"] != condType {
			continue
		}
		if (status == "" || cond["status"] == status) && (reason == "" || cond["reason"] == reason) {
			return nil
		}
		return fmt.Errorf("%s=%v %v: %v", condType, cond["status"], cond["reason"], cond["message"])
	}
	return fmt.Errorf("no %s condition", condType)
}
