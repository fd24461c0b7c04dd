package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/operator/internal/resources"
)

// CacheOptions keeps the manager's informer caches small: only objects
// labelled as managed by this operator are cached (a cluster's other
// Deployments, Services and budgets never enter memory), and managedFields,
// often the largest part of an object, are dropped before caching. An empty
// namespaces list watches the whole cluster.
func CacheOptions(namespaces []string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            {Label: managed},
			&corev1.Service{}:               {Label: managed},
			&policyv1.PodDisruptionBudget{}: {Label: managed},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
