package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/metrics"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// The objects a Memcached owns: reading them (from the cache; on deletion,
// as metadata from the apiserver when the cache lacks them), creating the
// missing ones, applying the ones that differ, and deleting the ones no
// longer wanted.

// ownedObject is one object a Memcached owns, as read before the apply.
type ownedObject struct {
	kind string
	// live is the object as the apiserver holds it; empty when missing.
	live client.Object
	// exists: live is the object and this Memcached controls it.
	exists bool
	// takenBy is set when an object of that name exists and this Memcached
	// does not control it: the operator leaves it alone.
	takenBy *resourceExistsError
	// metadataOnly: the object was missing from the cache and was read from
	// the apiserver, metadata only; an apply reads the rest before it
	// compares (apply.go).
	metadataOnly bool
}

// owned is what the cluster holds of the objects a Memcached owns.
type owned struct {
	// workload is the Deployment, or the StatefulSet with identity Stable.
	workload, service, pdb ownedObject
}

func (o *owned) all() []*ownedObject { return []*ownedObject{&o.workload, &o.service, &o.pdb} }

// readOwned reads the objects named after mc from the cache. The cache holds
// only objects carrying the operator's labels; one missing from it is
// created with a POST, which finds a same-named object without the labels
// (createOrFind), so a reconcile reads nothing from the apiserver here. The
// deletion (lookUpMissing) does look the workload and the Service up, as
// metadata: it must delete the Memcached's own even when they lost their
// labels.
func (r *MemcachedReconciler) readOwned(ctx context.Context, mc *cachev1alpha1.Memcached, lookUpMissing bool) (*owned, error) {
	workload := ownedObject{kind: "Deployment", live: &appsv1.Deployment{}}
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		workload = ownedObject{kind: "StatefulSet", live: &appsv1.StatefulSet{}}
	}
	cur := &owned{
		workload: workload,
		service:  ownedObject{kind: "Service", live: &corev1.Service{}},
		pdb:      ownedObject{kind: "PodDisruptionBudget", live: &policyv1.PodDisruptionBudget{}},
	}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	for _, o := range cur.all() {
		if err := r.readOne(ctx, mc, key, o, lookUpMissing && o != &cur.pdb); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

func (r *MemcachedReconciler) readOne(ctx context.Context, mc *cachev1alpha1.Memcached, key types.NamespacedName, o *ownedObject, lookUp bool) error {
	err := r.Get(ctx, key, o.live)
	if apierrors.IsNotFound(err) && lookUp && r.APIReader != nil {
		err = r.readMetadata(ctx, key, o)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read %s %s: %w", o.kind, key.Name, err)
	case metav1.IsControlledBy(o.live, mc), isOwnOrphan(o.live, mc):
		o.exists = true
	default:
		o.takenBy = &resourceExistsError{kind: o.kind, name: key.Name, owner: metav1.GetControllerOf(o.live)}
	}
	return nil
}

// readMetadata reads an owned object's metadata from the apiserver into
// o.live.
func (r *MemcachedReconciler) readMetadata(ctx context.Context, key types.NamespacedName, o *ownedObject) error {
	m, err := r.emptyMetadata(o.live)
	if err != nil {
		return err
	}
	if err := r.APIReader.Get(ctx, key, m); err != nil {
		return err
	}
	switch live := o.live.(type) {
	case *appsv1.Deployment:
		live.ObjectMeta = m.ObjectMeta
	case *appsv1.StatefulSet:
		live.ObjectMeta = m.ObjectMeta
	case *corev1.Service:
		live.ObjectMeta = m.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		live.ObjectMeta = m.ObjectMeta
	default:
		return fmt.Errorf("read metadata of %T: not an owned kind", o.live)
	}
	o.metadataOnly = true
	return nil
}

// adoptingDuringDeletion tells whether an apply would adopt one of mc's
// orphaned objects while mc, as the apiserver holds it, is being deleted.
// With `kubectl delete --cascade=orphan` the garbage collector removes the
// owner references first; their update events can reach a reconcile whose
// cached Memcached does not show the deletion yet, and adopting then puts
// the references back, so the finalizer deletes what the user asked to
// keep (test/e2e's semantics test caught it under load). The apiserver is
// only asked when there is an orphan to adopt.
func (r *MemcachedReconciler) adoptingDuringDeletion(ctx context.Context, mc *cachev1alpha1.Memcached, cur *owned) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	adopting := false
	for _, o := range cur.all() {
		if o.exists && !metav1.IsControlledBy(o.live, mc) {
			adopting = true
		}
	}
	if !adopting {
		return false, nil
	}
	fresh := &cachev1alpha1.Memcached{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(mc), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read Memcached %s before adopting its objects: %w", mc.Name, err)
	}
	return fresh.UID != mc.UID || !fresh.DeletionTimestamp.IsZero(), nil
}

// isOwnOrphan tells whether obj is one of mc's objects that lost its owner
// reference (edited away by hand, or orphaned when an earlier Memcached of
// that name was deleted with propagationPolicy Orphan): it has no controller
// and carries every label the operator puts on mc's objects, managed-by
// included. The operator adopts it, as a ReplicaSet adopts the orphaned pods
// its selector matches; the apply puts the owner reference back. An object
// without those labels (another tool's cache of the same name) is still left
// alone.
func isOwnOrphan(obj client.Object, mc *cachev1alpha1.Memcached) bool {
	if metav1.GetControllerOf(obj) != nil || !obj.GetDeletionTimestamp().IsZero() {
		return false
	}
	return labels.SelectorFromSet(resources.Labels(mc)).Matches(labels.Set(obj.GetLabels()))
}

// liveWorkload is the Deployment or StatefulSet as the apiserver holds it,
// or nil when it does not exist.
func (o *owned) liveWorkload() client.Object {
	if !o.workload.exists {
		return nil
	}
	return o.workload.live
}

// resourceExistsError: an object the operator would create exists and is
// not controlled by the Memcached.
type resourceExistsError struct {
	kind, name string
	owner      *metav1.OwnerReference
}

// isResourceExists tells whether err is or wraps a resourceExistsError.
func isResourceExists(err error) bool {
	var e *resourceExistsError
	return errors.As(err, &e)
}

func (e *resourceExistsError) Error() string {
	by := "no controller"
	if e.owner != nil {
		by = "controller " + e.owner.Kind + "/" + e.owner.Name
	}
	return fmt.Sprintf("%s %s already exists and is not controlled by this Memcached (%s): the operator leaves it alone; delete or rename it, or rename the Memcached", e.kind, e.name, by)
}

// applyOwned adds the finalizer and applies the workload, Service and
// PodDisruptionBudget, all at once: they are independent requests, and a
// reconcile that waited for each in turn would spend most of its time in
// round trips. It deletes the budget when it is no longer wanted, and carries
// on after a failure so that one rejected object does not hold back the
// others.
func (r *MemcachedReconciler) applyOwned(ctx context.Context, before, mc *cachev1alpha1.Memcached, cur *owned) error {
	type outcome struct {
		changed bool
		err     error
	}
	var oldReplicas int32
	if w := workloadOf(cur.liveWorkload()); w != nil {
		oldReplicas = w.specReplicas
	}
	if deleting, err := r.adoptingDuringDeletion(ctx, mc, cur); err != nil || deleting {
		return err
	}
	var workload runtime.ApplyConfiguration = resources.Deployment(mc, r.Defaults)
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		workload = resources.StatefulSet(mc, r.Defaults)
	}
	desired := []runtime.ApplyConfiguration{workload, resources.Service(mc), nil}
	if pdb := resources.PodDisruptionBudget(mc); pdb != nil {
		desired[2] = pdb
	}
	objects := cur.all()
	outcomes := make([]outcome, len(objects))
	var finalizerErr error
	var wg sync.WaitGroup
	if !controllerutil.ContainsFinalizer(mc, cachev1alpha1.Finalizer) {
		wg.Go(func() { finalizerErr = r.ensureFinalizer(ctx, before, mc) })
	}
	for i, o := range objects {
		if desired[i] == nil || o.takenBy != nil {
			continue
		}
		wg.Go(func() {
			changed, err := r.applyIfChanged(ctx, mc, desired[i], o)
			outcomes[i] = outcome{changed: changed, err: err}
		})
	}
	wg.Wait()

	errs := []error{finalizerErr}
	var created, updated []string
	for i, o := range objects {
		switch out := outcomes[i]; {
		case o.takenBy != nil && desired[i] != nil:
			r.event(ctx, mc, nil, corev1.EventTypeWarning, EventResourceExists, "Apply", "%s", o.takenBy.Error())
			errs = append(errs, o.takenBy)
		case out.err != nil:
			errs = append(errs, r.applyFailed(ctx, mc, o.kind, out.err))
		case !out.changed:
		case o.exists:
			updated = append(updated, o.kind)
		default:
			created = append(created, o.kind)
			o.exists = true
		}
	}
	if outcomes[0].changed && cur.workload.exists && !cur.workload.metadataOnly && oldReplicas != mc.GetSize() && slices.Contains(updated, cur.workload.kind) {
		r.event(ctx, mc, cur.workload.live, corev1.EventTypeNormal, EventScaled, "Scale",
			"scaled %s %s from %d to %d pods", cur.workload.kind, mc.Name, oldReplicas, mc.GetSize())
	}
	if desired[2] == nil && cur.pdb.exists {
		if err := r.deleteOwned(ctx, mc, cur.pdb.live); err != nil {
			errs = append(errs, err)
		} else {
			cur.pdb.exists = false
			r.event(ctx, mc, cur.pdb.live, corev1.EventTypeNormal, EventDeleted, "Delete",
				"deleted PodDisruptionBudget %s: it is no longer wanted", mc.Name)
		}
	}

	// A write after the spec was already reconciled undoes someone else's
	// change: a drift heal. The cached status may not show the operator's
	// own last report yet.
	healing := before.Status.ObservedGeneration == mc.Generation || r.tracker().reported(mc.UID) == mc.Generation
	for _, kinds := range []struct {
		reason string
		kinds  []string
	}{{metrics.WriteCreated, created}, {metrics.WriteUpdated, updated}} {
		for _, kind := range kinds.kinds {
			metrics.OwnedWrites.WithLabelValues(kind, kinds.reason).Inc()
			if healing {
				metrics.DriftHeals.WithLabelValues(kind).Inc()
			}
		}
	}

	// One event per kind of change and reconcile: a new Memcached is one
	// "Created" event, not three.
	if len(created) > 0 {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventCreated, "Create", "created %s %s", strings.Join(created, ", "), mc.Name)
	}
	if len(updated) > 0 {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventUpdated, "Update", "updated %s %s to match the spec", strings.Join(updated, ", "), mc.Name)
	}
	return errors.Join(errs...)
}

// applyFailed reports a rejected apply. The apiserver's message (for example
// an admission or validation error on the pod template) goes into the event
// and, through the returned error, into the Degraded condition.
func (r *MemcachedReconciler) applyFailed(ctx context.Context, mc *cachev1alpha1.Memcached, kind string, err error) error {
	err = fmt.Errorf("apply %s %s: %w", kind, mc.Name, err)
	if !apierrors.IsConflict(err) {
		r.event(ctx, mc, nil, corev1.EventTypeWarning, EventApplyFailed, "Apply", "%s", err.Error())
	}
	return err
}

// deleteOwned deletes obj if it still is the object that was read, so that a
// replacement created meanwhile by someone else is left alone.
func (r *MemcachedReconciler) deleteOwned(ctx context.Context, mc *cachev1alpha1.Memcached, obj client.Object) error {
	uid := obj.GetUID()
	err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		err = fmt.Errorf("delete %s %s: %w", kindOf(obj), obj.GetName(), err)
		r.event(ctx, mc, obj, corev1.EventTypeWarning, EventDeleteFailed, "Delete", "%s", err.Error())
		return err
	}
	if err == nil {
		metrics.OwnedWrites.WithLabelValues(kindOf(obj), metrics.WriteDeleted).Inc()
	}
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *corev1.Service:
		return "Service"
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget"
	}
	return fmt.Sprintf("%T", obj)
}
