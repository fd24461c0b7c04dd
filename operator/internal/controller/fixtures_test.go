package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Fixtures shared by the pure tests and the envtest suite.

// newMemcached returns a Memcached with size pods, changed by mutate.
func newMemcached(namespace, name string, size int32, mutate ...func(*cachev1alpha1.Memcached)) *cachev1alpha1.Memcached {
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       cachev1alpha1.MemcachedSpec{Size: &size},
	}
	for _, f := range mutate {
		f(mc)
	}
	return mc
}

func key(obj client.Object) types.NamespacedName { return client.ObjectKeyFromObject(obj) }

var testDefaults = resources.Options{MemcachedImage: "memcached:1.6.39-alpine", ExporterImage: "quay.io/prometheus/memcached-exporter:v0.14.4", ReloaderImage: "memcached-operator:test"}
