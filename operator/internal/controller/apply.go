package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
func (r *MemcachedReconciler) applyIfChanged(ctx context.Context, desired runtime.ApplyConfiguration, o *ownedObject) (bool, error) {
	live, exists := o.live, o.exists
	var want, before map[string]any
	if exists && !o.metadataOnly {
		var err error
		if want, before, err = asUnstructured(desired, live); err != nil {
			return false, err
		}
		if subset(want, before) {
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
	if err := r.Patch(ctx, live, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, err
	}
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

// asUnstructured converts an apply configuration and a typed object for subset.
// Both sides go through the unstructured converter, so numbers are int64 on
// both and quantities their canonical strings, without rendering JSON text on
// every steady-state reconcile.
func asUnstructured(want, have any) (w, h map[string]any, err error) {
	if w, err = runtime.DefaultUnstructuredConverter.ToUnstructured(want); err != nil {
		return nil, nil, err
	}
	if h, err = runtime.DefaultUnstructuredConverter.ToUnstructured(have); err != nil {
		return nil, nil, err
	}
	return w, h, nil
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
