package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// ensureFinalizer adds the finalizer with a server-side apply of just
// metadata.finalizers. metadata.finalizers is a set, so the apply adds ours
// without touching anyone else's and cannot conflict, unlike an update or a
// merge patch of the whole list. before gets the same new metadata, so the
// status patch computed from it carries status only.
func (r *MemcachedReconciler) ensureFinalizer(ctx context.Context, before, mc *cachev1alpha1.Memcached) error {
	if controllerutil.ContainsFinalizer(mc, cachev1alpha1.Finalizer) {
		return nil
	}
	applied, err := r.applyFinalizer(ctx, mc)
	if err != nil || applied == nil {
		return err
	}
	for _, m := range []*cachev1alpha1.Memcached{before, mc} {
		m.SetFinalizers(applied.GetFinalizers())
		m.SetResourceVersion(applied.GetResourceVersion())
	}
	return nil
}

// finalize runs once a Memcached is being deleted. It deletes the owned
// objects and reports it, unless the deletion asked to orphan them
// (`kubectl delete --cascade=orphan`: the garbage collector then removes
// their owner references and they stay), and releases the finalizer. It
// never waits for the objects to disappear (garbage collection of their pods
// is the cluster's job) and skips objects that are already gone, so a
// deleted Memcached goes away within one reconcile, with foreground
// deletion too.
func (r *MemcachedReconciler) finalize(ctx context.Context, mc *cachev1alpha1.Memcached) error {
	if !controllerutil.ContainsFinalizer(mc, cachev1alpha1.Finalizer) {
		r.tracker().forget(mc.UID)
		return nil
	}
	cur, err := r.readOwned(ctx, mc, true)
	if err != nil {
		return err
	}

	var kinds []string
	var errs []error
	orphan := controllerutil.ContainsFinalizer(mc, metav1.FinalizerOrphanDependents)
	for _, o := range cur.all() {
		// Only what mc still controls. An object that lost its owner
		// reference during the deletion was orphaned: the garbage collector
		// removes the references and then its orphan finalizer, so a
		// reconcile retried after that (a conflict on the release, say)
		// no longer sees the finalizer, and must not delete what it left.
		if !o.exists || !metav1.IsControlledBy(o.live, mc) {
			continue
		}
		if !orphan {
			controlled, err := r.stillControlled(ctx, mc, o.live)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !controlled {
				continue
			}
			if err := r.deleteOwned(ctx, mc, o.live); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		kinds = append(kinds, o.kind)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	switch {
	case len(kinds) > 0 && orphan:
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventOrphaned, "Delete",
			"left %s %s in place: the Memcached was deleted with propagation policy Orphan", strings.Join(kinds, ", "), mc.Name)
	case len(kinds) > 0:
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventDeleted, "Delete", "deleted %s %s", strings.Join(kinds, ", "), mc.Name)
	}
	return r.releaseFinalizer(ctx, mc)
}

// stillControlled reads obj from the apiserver, not the cache, and says
// whether mc still controls it. The cache can lag both ways at once: it may
// show the Memcached after the garbage collector removed its orphan
// finalizer while still showing the owned object with the owner reference
// the collector removed first. Deleting on that view would delete what
// `--cascade=orphan` left to the user.
func (r *MemcachedReconciler) stillControlled(ctx context.Context, mc *cachev1alpha1.Memcached, obj client.Object) (bool, error) {
	if r.APIReader == nil {
		return true, nil
	}
	live, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return true, nil
	}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read %s %s: %w", kindOf(obj), obj.GetName(), err)
	}
	return metav1.IsControlledBy(live, mc), nil
}

// releaseFinalizer removes the operator's finalizer and nothing else. It is
// a merge patch of the list as read, guarded by the resourceVersion, not a
// server-side apply: releasing through apply drops finalizers the apiserver
// added during deletion without a field manager (orphan,
// foregroundDeletion), which would defeat `--cascade=orphan` and foreground
// deletion. A conflict (the garbage collector changed the list meanwhile)
// retries with backoff.
func (r *MemcachedReconciler) releaseFinalizer(ctx context.Context, mc *cachev1alpha1.Memcached) error {
	base := mc.DeepCopy()
	controllerutil.RemoveFinalizer(mc, cachev1alpha1.Finalizer)
	r.tracker().forget(mc.UID)
	if err := r.Patch(ctx, mc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("release finalizer: %w", err))
	}
	return nil
}

// applyFinalizer server-side applies the operator's view of
// metadata.finalizers: listing the finalizer claims it without touching
// anyone else's. It returns the object's metadata as applied, or nil when
// it no longer exists. Only the metadata is asked for: the reconcile needs
// the new finalizers and resourceVersion, not the whole Memcached decoded
// from JSON once more.
func (r *MemcachedReconciler) applyFinalizer(ctx context.Context, mc *cachev1alpha1.Memcached) (*metav1.PartialObjectMetadata, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("Memcached"))
	u.SetNamespace(mc.Namespace)
	u.SetName(mc.Name)
	// The UID pins the apply to this object: if it was deleted and recreated
	// meanwhile, the apply fails instead of creating or touching the new one.
	u.SetUID(mc.UID)
	u.SetFinalizers([]string{cachev1alpha1.Finalizer})
	body, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	applied := &metav1.PartialObjectMetadata{}
	applied.SetGroupVersionKind(u.GroupVersionKind())
	applied.SetNamespace(mc.Namespace)
	applied.SetName(mc.Name)
	if err := r.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && r.gone(ctx, mc)) {
			return nil, nil // deleted meanwhile: nothing left to hold or release
		}
		return nil, fmt.Errorf("apply finalizers: %w", err)
	}
	r.tracker().record(mc.UID, applied.GetResourceVersion(), 0)
	return applied, nil
}

// gone reports whether mc no longer exists with its UID.
func (r *MemcachedReconciler) gone(ctx context.Context, mc *cachev1alpha1.Memcached) bool {
	cur := &cachev1alpha1.Memcached{}
	err := r.Get(ctx, client.ObjectKeyFromObject(mc), cur)
	return apierrors.IsNotFound(err) || (err == nil && cur.UID != mc.UID)
}
