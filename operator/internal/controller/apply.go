package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// FieldOwner is the server-side apply field manager of everything the
// operator writes.
const FieldOwner = "memcached-operator"

// applyIfChanged creates desired when it does not exist (create), and
// otherwise server-side applies it unless live already holds everything
// desired says; live is then replaced with the apiserver's answer.
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
// apiserver) is read in full and compared like a cached one: an apply
// without comparing would write whenever the object was created rather than
// applied, since the apply adds its own managedFields entry.
//
// A Deployment comes from the cache without its pod template. When the
// template's fingerprint is the one verified for the same desired object, or
// when the desired object changed (the apply is due anyway), the rest of the
// Deployment is compared; otherwise the Deployment is read from the apiserver
// and compared whole.
func (r *MemcachedReconciler) applyIfChanged(ctx context.Context, mc *cachev1alpha1.Memcached, desired runtime.ApplyConfiguration, o *ownedObject) (bool, error) {
	body, err := json.Marshal(desired)
	if err != nil {
		return false, fmt.Errorf("encode apply: %w", err)
	}
	if !o.exists {
		created, err := r.createOrFind(ctx, mc, body, o)
		if err != nil || created {
			return created, err
		}
	}
	// From here on the object exists and is the operator's.
	live := o.live
	if o.metadataOnly {
		// Decoded into an empty object: a decoder merges maps, and labels
		// removed since the metadata was read must not survive.
		key, at := client.ObjectKeyFromObject(live), notOlderThan(live)
		reflect.ValueOf(live).Elem().SetZero()
		if err := r.APIReader.Get(ctx, key, live, at); err != nil {
			return false, fmt.Errorf("read %s %s: %w", o.kind, key.Name, err)
		}
	}
	want, err := desiredObject(desired)
	if err != nil {
		return false, err
	}
	if fingerprint, templateless := cachedWithoutTemplate(live); templateless {
		key, hash := client.ObjectKeyFromObject(live), desiredHash(want)
		verified := func() bool { return r.templates().holds(key, live.GetUID(), fingerprint, hash) }
		changed := live.GetAnnotations()[resources.DesiredHashAnnotation] != hash
		if !changed && !verified() {
			// After a restart the warm-up may be verifying it now.
			r.templates().awaitWarmUp(ctx)
		}
		if changed || verified() {
			// The template is as verified, or the desired object
			// changed and is applied whatever the template holds:
			// compare the rest.
			want = withoutPodTemplate(want)
		} else if err := r.APIReader.Get(ctx, key, withoutFingerprint(live), notOlderThan(live)); err != nil {
			return false, fmt.Errorf("read %s %s: %w", o.kind, key.Name, err)
		}
	}
	before, holds, err := r.holdsDesired(want, live)
	if err != nil || holds {
		return false, err
	}
	if err := r.handOverToApply(ctx, live, desiredHash(want)); err != nil {
		return false, err
	}
	if err := r.Patch(ctx, withoutFingerprint(live), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, err
	}
	r.verifiedTemplate(live)
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, err
	}
	return differsOn(want, before, after), nil
}

// holdsDesired reports whether live holds every field want sets, and
// records live's pod template as verified when it does. It returns live as
// compared, unstructured.
func (r *MemcachedReconciler) holdsDesired(want map[string]any, live client.Object) (map[string]any, bool, error) {
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return nil, false, err
	}
	if !subset(want, have) {
		return have, false, nil
	}
	r.verifiedTemplate(live)
	return have, true, nil
}

// desiredObject is desired as the comparison sees it: unstructured, without
// apiVersion and kind, which address the object rather than describe it
// (a typed object read from the apiserver has them empty).
func desiredObject(desired runtime.ApplyConfiguration) (map[string]any, error) {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, err
	}
	delete(want, "apiVersion")
	delete(want, "kind")
	return want, nil
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

// createOrFind creates an object missing from the cache with a plain POST
// of the desired object (body, the apply configuration as JSON) and reports
// true, with o.live the apiserver's answer. A create costs the apiserver
// less than a server-side apply that creates the same object
// (docs/performance.md): the apply merges the configuration into an empty
// object and builds its managed fields from a second comparison. The POST's
// fields are owned by an Update entry of FieldOwner, which handOverToApply
// moves to the apply entry before the first apply that could drop one.
//
// A POST cannot take anything over, so the cache's miss needs no lookup
// first: a new Memcached costs no reads. When the object exists after all
// (another tool's of the same name, one of the operator's that lost its
// labels and with them its place in the cache, or one the cache has not
// shown yet), its metadata is read: o becomes the operator's object to
// compare and apply (false, nil), or someone else's, left alone (o.takenBy).
func (r *MemcachedReconciler) createOrFind(ctx context.Context, mc *cachev1alpha1.Memcached, body []byte, o *ownedObject) (bool, error) {
	fresh, ok := o.live.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not an object", o.live)
	}
	reflect.ValueOf(fresh).Elem().SetZero()
	if err := json.Unmarshal(body, fresh); err != nil {
		return false, fmt.Errorf("decode %s: %w", o.kind, err)
	}
	err := r.Create(ctx, fresh, client.FieldOwner(FieldOwner))
	if err == nil {
		o.live = fresh
		r.verifiedTemplate(fresh)
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) || r.APIReader == nil {
		return false, err
	}
	key := client.ObjectKeyFromObject(fresh)
	if err := r.readMetadata(ctx, key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return false, apierrors.NewConflict(schema.GroupResource{Resource: o.kind}, key.Name,
				errors.New("it existed when it was created and is gone now; the retry creates it"))
		}
		return false, fmt.Errorf("read %s %s: %w", o.kind, key.Name, err)
	}
	if metav1.IsControlledBy(o.live, mc) || isOwnOrphan(o.live, mc) {
		o.exists = true
		return false, nil
	}
	o.takenBy = &resourceExistsError{kind: o.kind, name: key.Name, owner: metav1.GetControllerOf(o.live)}
	return false, o.takenBy
}

// handOverToApply gives the operator's apply entry the fields its create
// owns, before it applies an object it created: client-go's csaupgrade turns
// FieldOwner's Update entry into its Apply entry. Without that, a field
// later dropped from the desired object would stay, still owned by the
// create.
//
// Only a changed desired object can drop a field, so an apply of the same
// desired object (hash, the one live carries: a drift heal, or an apply
// after a restart that changes nothing) needs no hand-over and writes
// nothing more. Once an object has been handed over there is nothing to
// move; objects created by an apply never need it.
//
// The cache strips managedFields, so they are read, as metadata, unless
// live carries them (an apiserver answer): one read per spec change of an
// object, never a steady-state cost.
func (r *MemcachedReconciler) handOverToApply(ctx context.Context, live client.Object, hash string) error {
	if live.GetAnnotations()[resources.DesiredHashAnnotation] == hash {
		return nil
	}
	target, err := r.emptyMetadata(live)
	if err != nil {
		return err
	}
	withFields := live
	if len(live.GetManagedFields()) == 0 {
		m := target.DeepCopy()
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		if err := reader.Get(ctx, client.ObjectKeyFromObject(live), m, notOlderThan(live)); err != nil {
			return fmt.Errorf("read %s %s: %w", kindOf(live), live.GetName(), err)
		}
		withFields = m
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(withFields, sets.New(FieldOwner), FieldOwner)
	if err != nil || patch == nil {
		return err
	}
	target.SetNamespace(live.GetNamespace())
	target.SetName(live.GetName())
	// The patch carries the resourceVersion it was computed at: a write
	// in between is a conflict, and the retry computes it again.
	if err := r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("hand %s %s over to server-side apply: %w", kindOf(live), live.GetName(), err)
	}
	live.SetResourceVersion(target.GetResourceVersion())
	return nil
}

// emptyMetadata is an empty metadata-only object of obj's kind, to read or
// patch obj's metadata alone.
func (r *MemcachedReconciler) emptyMetadata(obj client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return nil, err
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m, nil
}
