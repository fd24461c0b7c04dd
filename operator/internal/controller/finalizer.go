package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	applied, err := r.applyFinalizers(ctx, mc, []string{cachev1alpha1.Finalizer})
	if err != nil || applied == nil {
		return err
	}
	for _, m := range []*cachev1alpha1.Memcached{before, mc} {
		m.SetFinalizers(applied.GetFinalizers())
		m.SetResourceVersion(applied.GetResourceVersion())
	}
	return nil
}

// finalize runs once a Memcached is being deleted: it deletes the owned
// objects, reports it, and releases the finalizer. It never waits for the
// objects to disappear (garbage collection of their pods is the cluster's
// job), so a deleted Memcached goes away within one reconcile.
func (r *MemcachedReconciler) finalize(ctx context.Context, mc *cachev1alpha1.Memcached) error {
	if !controllerutil.ContainsFinalizer(mc, cachev1alpha1.Finalizer) {
		return nil
	}
	cur, err := r.readOwned(ctx, mc)
	if err != nil {
		return err
	}

	var deleted []string
	var errs []error
	for _, o := range []struct {
		kind   string
		obj    client.Object
		exists bool
	}{
		{"Deployment", &cur.deployment, cur.hasDeployment},
		{"Service", &cur.service, cur.hasService},
		{"PodDisruptionBudget", &cur.pdb, cur.hasPDB},
	} {
		if !o.exists {
			continue
		}
		if err := r.deleteOwned(ctx, mc, o.obj); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, o.kind)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(deleted) > 0 {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventDeleted, "Delete", "deleted %s %s", strings.Join(deleted, ", "), mc.Name)
	}
	applied, err := r.applyFinalizers(ctx, mc, nil)
	if err != nil || applied == nil || !controllerutil.ContainsFinalizer(applied, cachev1alpha1.Finalizer) {
		return err
	}
	mc.SetFinalizers(applied.GetFinalizers())
	mc.SetResourceVersion(applied.GetResourceVersion())
	// Another field manager also lists our finalizer (for example a manifest
	// exported with it and re-applied), so releasing our claim left it in
	// place. Remove it outright rather than leave the Memcached stuck.
	base := mc.DeepCopy()
	controllerutil.RemoveFinalizer(mc, cachev1alpha1.Finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, mc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// applyFinalizers server-side applies the operator's view of
// metadata.finalizers: listing the finalizer claims it, an empty list
// releases it (the apiserver removes entries no manager owns any more). It
// returns the object as applied, or nil when it no longer exists.
func (r *MemcachedReconciler) applyFinalizers(ctx context.Context, mc *cachev1alpha1.Memcached, finalizers []string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("Memcached"))
	u.SetNamespace(mc.Namespace)
	u.SetName(mc.Name)
	// The UID pins the apply to this object: if it was deleted and recreated
	// meanwhile, the apply fails instead of creating or touching the new one.
	u.SetUID(mc.UID)
	u.SetFinalizers(finalizers)
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && r.gone(ctx, mc)) {
			return nil, nil // deleted meanwhile: nothing left to hold or release
		}
		return nil, fmt.Errorf("apply finalizers: %w", err)
	}
	return u, nil
}

// gone reports whether mc no longer exists with its UID.
func (r *MemcachedReconciler) gone(ctx context.Context, mc *cachev1alpha1.Memcached) bool {
	cur := &cachev1alpha1.Memcached{}
	err := r.Get(ctx, client.ObjectKeyFromObject(mc), cur)
	return apierrors.IsNotFound(err) || (err == nil && cur.UID != mc.UID)
}
