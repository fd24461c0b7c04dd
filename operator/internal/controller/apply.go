package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/operator/internal/resources"
)

// FieldOwner is the server-side apply field manager of everything the
// operator writes.
const FieldOwner = "memcached-operator"

// applyIfChanged server-side applies desired unless live already holds
// everything desired says, and then replaces live with the apiserver's answer.
// It reports whether the object changed: whether the apiserver created it or
// now holds other values in the fields desired sets. An apply that changes
// nothing (a mutating webhook or another field manager immediately puts its
// own value back) is not a change and makes no event.
//
// Skipping the no-op apply is what makes a steady-state reconcile free: an
// apply that changes nothing still costs an apiserver write request and an
// admission pass. The comparison needs no managedFields (the cache strips
// them): desired must be a subset of live, and since the builders stamp a
// hash of the desired object on it, dropping a field from desired (which a
// subset test cannot see) changes the hash and forces the apply that removes
// the field.
//
// The body is the apply configuration as JSON, as client.Apply sends it, but
// the answer is decoded straight into live, as protobuf for the built-in
// kinds: client.Apply decodes it as JSON into the apply configuration, which
// would then have to be converted to live. For a new object nothing is
// converted at all. The profile of 1,000 new Memcacheds put those
// conversions at a fifth of the manager's CPU (docs/performance.md).
//
// An object read as metadata only (missing from the cache, found in the
// apiserver) is applied without comparing, and changed if its
// resourceVersion moved.
//
// A Deployment comes from the cache without its pod template. When the
// template's fingerprint is the one verified for the same desired object, or
// when the desired object changed (the apply is due anyway), the rest of the
// Deployment is compared; otherwise the Deployment is read from the apiserver
// and compared whole.
func (r *MemcachedReconciler) applyIfChanged(ctx context.Context, desired runtime.ApplyConfiguration, o *ownedObject) (bool, error) {
	live, exists := o.live, o.exists
	var want, before map[string]any
	if exists && !o.metadataOnly {
		var err error
		if want, err = runtime.DefaultUnstructuredConverter.ToUnstructured(desired); err != nil {
			return false, err
		}
		// apiVersion and kind address the object rather than describe it,
		// and a typed object read from the apiserver has them empty.
		delete(want, "apiVersion")
		delete(want, "kind")
		if fingerprint, templateless := cachedWithoutTemplate(live); templateless {
			key, hash := client.ObjectKeyFromObject(live), desiredHash(want)
			if r.templates().holds(key, live.GetUID(), fingerprint, hash) || live.GetAnnotations()[resources.DesiredHashAnnotation] != hash {
				// The template is as verified, or the desired object
				// changed and is applied whatever the template holds:
				// compare the rest.
				want = withoutPodTemplate(want)
			} else if err := r.APIReader.Get(ctx, key, withoutFingerprint(live), notOlderThan(live)); err != nil {
				return false, fmt.Errorf("read %s %s: %w", o.kind, key.Name, err)
			}
		}
		if before, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
			return false, err
		}
		if subset(want, before) {
			r.verifiedTemplate(live)
			return false, nil
		}
	}
	body, err := json.Marshal(desired)
	if err != nil {
		return false, fmt.Errorf("encode apply: %w", err)
	}
	named, ok := desired.(namedApplyConfiguration)
	if !ok || named.GetName() == nil {
		return false, fmt.Errorf("apply configuration %T has no name", desired)
	}
	// A missing object's live copy is empty; the request is addressed by it.
	live.SetNamespace(ptr.Deref(named.GetNamespace(), ""))
	live.SetName(*named.GetName())
	readAt := live.GetResourceVersion()
	if err := r.Patch(ctx, withoutFingerprint(live), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, err
	}
	r.verifiedTemplate(live)
	switch {
	case !exists:
		return true, nil
	case o.metadataOnly:
		o.metadataOnly = false
		return live.GetResourceVersion() != readAt, nil
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, err
	}
	return differsOn(want, before, after), nil
}

// verifiedTemplate records the pod template of live, a Deployment read in
// full that holds everything desired sets (an apply's answer, or a copy that
// passed the comparison), as verified against the desired hash it carries.
// Other kinds, and a Deployment whose template the cache dropped (only the
// rest of it was compared), are left alone.
func (r *MemcachedReconciler) verifiedTemplate(live client.Object) {
	d, ok := live.(*appsv1.Deployment)
	if _, templateless := cachedWithoutTemplate(live); !ok || templateless {
		return
	}
	fingerprint, err := templateFingerprint(&d.Spec.Template)
	if err != nil {
		// Unreachable for a decoded object; without a record the next
		// reconcile compares in full, which is only slower.
		return
	}
	r.templates().verified(client.ObjectKeyFromObject(d), d.UID, fingerprint, d.Annotations[resources.DesiredHashAnnotation])
}

// withoutFingerprint removes the cache's template fingerprint from obj (a
// copy) before a full copy is decoded into it: a JSON decoder merges maps,
// and a full Deployment that kept the fingerprint would pass for a cached
// one.
func withoutFingerprint(obj client.Object) client.Object {
	if _, templateless := cachedWithoutTemplate(obj); templateless {
		annotations := obj.GetAnnotations()
		delete(annotations, cachedTemplateAnnotation)
		obj.SetAnnotations(annotations)
	}
	return obj
}

// notOlderThan asks for obj as the apiserver holds it at obj's
// resourceVersion or later. The apiserver may answer such a read from its
// watch cache instead of a quorum read from etcd, which matters after a
// restart, when every Deployment is read once. A copy at least as new as the
// cached one is all the comparison needs: a later change comes with its own
// watch event.
func notOlderThan(obj client.Object) *client.GetOptions {
	return &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: obj.GetResourceVersion()}}
}

// desiredHash is the desired-hash annotation of an unstructured desired
// object.
func desiredHash(want map[string]any) string {
	h, _, _ := unstructured.NestedString(want, "metadata", "annotations", resources.DesiredHashAnnotation)
	return h
}

// withoutPodTemplate returns want without spec.template, copying only the
// maps on the way to it.
func withoutPodTemplate(want map[string]any) map[string]any {
	spec, ok := want["spec"].(map[string]any)
	if !ok {
		return want
	}
	out := maps.Clone(want)
	out["spec"] = maps.Clone(spec)
	delete(out["spec"].(map[string]any), "template")
	return out
}

// namedApplyConfiguration is what client-go's generated apply
// configurations tell about the object they address.
type namedApplyConfiguration interface {
	GetName() *string
	GetNamespace() *string
}

// differsOn reports whether after differs from before in any field want
// sets. Comparing resourceVersions instead would call a no-op apply a change
// whenever the cached copy lagged behind someone else's write (the
// Deployment controller's status updates), and make false "Updated" events.
// Lists are compared whole: the operator applies them whole.
func differsOn(want, before, after any) bool {
	w, ok := want.(map[string]any)
	if !ok {
		return !equality.Semantic.DeepEqual(before, after)
	}
	b, _ := before.(map[string]any)
	a, _ := after.(map[string]any)
	for k, wv := range w {
		if differsOn(wv, b[k], a[k]) {
			return true
		}
	}
	return false
}

// subset reports whether every field set in want has the same value in
// have. Lists must have the same length and match element by element: owned
// lists (containers, ports, owner references) are applied in full, so a length
// difference is drift.
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, found := h[k]
			if !found || !subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}
