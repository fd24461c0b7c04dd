package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/operator/internal/resources"
)

// CacheOptions keeps the manager's informer caches small: only objects
// labelled as managed by this operator are cached (a cluster's other
// Deployments, Services and budgets never enter memory), managedFields, often
// the largest part of an object, are dropped before caching, and so are the
// Deployments' pod templates (see dropPodTemplate); pods are cached reduced
// to what explains a refusal (see slimPod). An empty namespaces list
// watches the whole cluster.
func CacheOptions(namespaces []string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: managed, Transform: dropPodTemplate},
			// StatefulSets (identity Stable) keep their templates: they
			// are opt-in and few, and compared in full.
			&appsv1.StatefulSet{}:           {Label: managed},
			&corev1.Service{}:               {Label: managed},
			&policyv1.PodDisruptionBudget{}: {Label: managed},
			&corev1.Pod{}:                   {Label: managed, Transform: slimPod},
			// Secrets by metadata only, and only their name and version:
			// an annotation can hold a Secret's data (kubectl's
			// last-applied-configuration does).
			&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}: {Transform: secretIdentity},
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

// secretIdentity keeps of a Secret's metadata what maps it to the
// Memcacheds that name it and tells a change: namespace, name, uid and
// resourceVersion.
func secretIdentity(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// cachedTemplateAnnotation marks a cached Deployment whose pod template was
// dropped, and holds the fingerprint of that template. It exists only in the
// manager's memory: the operator never writes a cached object back.
const cachedTemplateAnnotation = "cache.example.com/cached-template-fingerprint"

// dropPodTemplate is the cache transform of Deployments: it strips
// managedFields and replaces the pod template with its fingerprint. The
// templates were the largest part of the manager's heap (39 of 143 MiB at
// 10,000 Memcacheds, docs/performance.md), and nothing reads them from the
// cache: status comes from the Deployment's status, and drift is found by
// comparing fingerprints with the one of the template the operator last
// verified (verifiedTemplates); only a template that changed since is read
// in full from the apiserver.
func dropPodTemplate(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	if _, done := cachedWithoutTemplate(d); done && len(d.Spec.Template.Spec.Containers) == 0 {
		// Transformed already (client-go may pass an object through twice);
		// the apiserver accepts no Deployment without containers.
		return d, nil
	}
	fingerprint, err := templateFingerprint(&d.Spec.Template)
	if err != nil {
		return nil, err
	}
	d.Spec.Template = corev1.PodTemplateSpec{}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[cachedTemplateAnnotation] = fingerprint
	return d, nil
}

// templateFingerprint is a hash of a pod template's protobuf encoding, which
// is deterministic (map keys are sorted): the same template read from a
// watch event and from an apply answer has the same fingerprint.
func templateFingerprint(t *corev1.PodTemplateSpec) (string, error) {
	b, err := t.Marshal()
	if err != nil {
		return "", fmt.Errorf("fingerprint pod template: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// cachedWithoutTemplate returns the fingerprint of the pod template the
// cache dropped from obj, if it did.
func cachedWithoutTemplate(obj client.Object) (string, bool) {
	if _, ok := obj.(*appsv1.Deployment); !ok {
		return "", false
	}
	fingerprint, ok := obj.GetAnnotations()[cachedTemplateAnnotation]
	return fingerprint, ok
}
