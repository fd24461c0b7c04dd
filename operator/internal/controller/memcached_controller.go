// Package controller holds the Memcached reconciler.
//
// A reconcile reads the Memcached and its owned objects from the cache, asks
// package resources for the desired objects, server-side applies the ones that
// differ, deletes the ones no longer wanted, and patches status once at the
// end. It never writes when nothing changed: unchanged objects are not
// applied and an unchanged status is not patched. The cache holds
// Deployments without their pod templates (cache.go); a template is read from
// the apiserver only when its fingerprint is not one the operator verified
// (templates.go, apply.go).
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/metrics"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Event reasons. Every change the operator makes is reported as an event on
// the Memcached, with the changed object as the related object.
const (
	EventCreated        = "Created"
	EventUpdated        = "Updated"
	EventScaled         = "Scaled"
	EventDeleted        = "Deleted"
	EventOrphaned       = "Orphaned"
	EventPaused         = "Paused"
	EventResumed        = "Resumed"
	EventApplyFailed    = "ApplyFailed"
	EventDeleteFailed   = "DeleteFailed"
	EventResourceExists = "ResourceExists"
)

// MemcachedReconciler reconciles Memcached objects.
type MemcachedReconciler struct {
	client.Client
	// APIReader reads from the apiserver, bypassing the cache: for objects
	// the filtered cache cannot hold (a same-named object without the
	// operator's labels) and for a fresh copy when the cache may be behind.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Defaults fills what a Memcached leaves unset (images).
	Defaults resources.Options
	// MaxConcurrentReconciles is the number of Memcacheds reconciled in
	// parallel. Zero means one.
	MaxConcurrentReconciles int

	// The write tracker and the template record are made on first use, by
	// whichever of the workers comes first, so under a sync.Once each.
	writesOnce    sync.Once
	writes        *ownWrites
	templatesOnce sync.Once
	verified      *verifiedTemplates
}

// The RBAC below is all the operator gets. It never reads Secrets; it
// reads pods only to report why one cannot run (pods.go), and never writes
// them: status comes from the Deployment's own status.
//
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one Memcached towards its spec and reports what it sees.
// Returned errors are retried by controller-runtime with per-object
// exponential backoff (5ms doubling up to ~16 minutes), so a persistent
// failure never becomes a hot loop.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			// Its Deployment bears its name.
			r.templates().forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.tracker().caughtUp(mc.UID, mc.ResourceVersion)

	if !mc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, mc)
	}

	before := mc.DeepCopy()
	defer func() {
		requeue, err := r.patchStatus(ctx, before, mc)
		if err != nil {
			retErr = errors.Join(retErr, err)
		}
		if retErr != nil {
			metrics.ReconcileErrors.WithLabelValues(metrics.ErrorReason(retErr, isResourceExists)).Inc()
		}
		if requeue && retErr == nil {
			result.RequeueAfter = staleRetry
		}
	}()
	return ctrl.Result{}, r.reconcile(ctx, before, mc)
}

// staleRetry is how soon a reconcile that found the cache behind the
// apiserver runs again: about the time an informer takes to catch up.
const staleRetry = 200 * time.Millisecond

func (r *MemcachedReconciler) tracker() *ownWrites {
	r.writesOnce.Do(func() { r.writes = newOwnWrites() })
	return r.writes
}

func (r *MemcachedReconciler) templates() *verifiedTemplates {
	r.templatesOnce.Do(func() { r.verified = newVerifiedTemplates() })
	return r.verified
}

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
	// the apiserver, metadata only; live has no spec or status to compare.
	metadataOnly bool
}

// owned is what the cluster holds of the objects a Memcached owns.
type owned struct {
	deployment, service, pdb ownedObject
}

func (o *owned) all() []*ownedObject { return []*ownedObject{&o.deployment, &o.service, &o.pdb} }

func (r *MemcachedReconciler) reconcile(ctx context.Context, before, mc *cachev1alpha1.Memcached) error {
	cur, err := r.readOwned(ctx, mc, resources.PodDisruptionBudget(mc) != nil)
	if err != nil {
		return err
	}

	if mc.Spec.Paused {
		if err := r.ensureFinalizer(ctx, before, mc); err != nil {
			return err
		}
		if !wasPaused(before) {
			r.event(ctx, mc, nil, corev1.EventTypeNormal, EventPaused, "Pause", "spec.paused is true: owned objects are left as they are")
		}
		pods, err := r.podsReport(ctx, mc, cur.liveDeployment())
		if err != nil {
			return err
		}
		summarize(mc, cur.liveDeployment(), pods, nil)
		return nil
	}
	if wasPaused(before) {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventResumed, "Resume", "spec.paused is false: reconciling owned objects again")
	}

	applyErr := r.applyOwned(ctx, before, mc, cur)
	pods, err := r.podsReport(ctx, mc, cur.liveDeployment())
	summarize(mc, cur.liveDeployment(), pods, applyErr)
	return errors.Join(applyErr, err)
}

// podsReport reads why mc's pods cannot run, while its Deployment has pods
// that are not ready or not updated; a Deployment with all its pods ready
// has nothing to explain, and the read is skipped.
func (r *MemcachedReconciler) podsReport(ctx context.Context, mc *cachev1alpha1.Memcached, dep *appsv1.Deployment) (podsReport, error) {
	if dep == nil || mc.GetSize() == 0 {
		return podsReport{}, nil
	}
	if reason, _ := rollout(dep, mc.GetSize()); reason == "" {
		return podsReport{}, nil
	}
	reason, message, err := r.readPodsTrouble(ctx, mc)
	return podsReport{reason: reason, message: message}, err
}

// readOwned reads the objects named after mc. The cache holds only objects
// carrying the operator's labels, so an object missing from it is looked up
// in the apiserver before anything is created: a same-named object without
// the labels (a cache being migrated to the operator, say) must be seen, or
// the forced apply would silently take it over. That lookup asks for the
// metadata only: who controls the object is all it decides, and for every
// new Memcached it runs three times and finds nothing. The budget is read
// only when it is wanted or may have to be deleted.
func (r *MemcachedReconciler) readOwned(ctx context.Context, mc *cachev1alpha1.Memcached, wantPDB bool) (*owned, error) {
	cur := &owned{
		deployment: ownedObject{kind: "Deployment", live: &appsv1.Deployment{}},
		service:    ownedObject{kind: "Service", live: &corev1.Service{}},
		pdb:        ownedObject{kind: "PodDisruptionBudget", live: &policyv1.PodDisruptionBudget{}},
	}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	for _, o := range cur.all() {
		if err := r.readOne(ctx, mc, key, o, o != &cur.pdb || wantPDB); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

func (r *MemcachedReconciler) readOne(ctx context.Context, mc *cachev1alpha1.Memcached, key types.NamespacedName, o *ownedObject, wanted bool) error {
	err := r.Get(ctx, key, o.live)
	if apierrors.IsNotFound(err) && wanted && r.APIReader != nil {
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
	gvk, err := apiutil.GVKForObject(o.live, r.Scheme())
	if err != nil {
		return err
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := r.APIReader.Get(ctx, key, m); err != nil {
		return err
	}
	switch live := o.live.(type) {
	case *appsv1.Deployment:
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

func (o *owned) liveDeployment() *appsv1.Deployment {
	if !o.deployment.exists {
		return nil
	}
	return o.deployment.live.(*appsv1.Deployment)
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

// applyOwned adds the finalizer and applies the Deployment, Service and
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
	if d := cur.liveDeployment(); d != nil {
		oldReplicas = ptr.Deref(d.Spec.Replicas, 0)
	}
	desired := []runtime.ApplyConfiguration{resources.Deployment(mc, r.Defaults), resources.Service(mc), nil}
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
			changed, err := r.applyIfChanged(ctx, desired[i], o)
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
	if outcomes[0].changed && cur.deployment.exists && !cur.deployment.metadataOnly && oldReplicas != mc.GetSize() && slices.Contains(updated, "Deployment") {
		r.event(ctx, mc, cur.deployment.live, corev1.EventTypeNormal, EventScaled, "Scale",
			"scaled Deployment %s from %d to %d pods", mc.Name, oldReplicas, mc.GetSize())
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
	case *corev1.Service:
		return "Service"
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget"
	}
	return fmt.Sprintf("%T", obj)
}

// patchStatus writes status if the reconcile changed it, and reports
// whether the reconcile should run again because the cache was behind.
//
// The decision is made against fresh data: when the cached Memcached may
// predate the operator's own last write, the apiserver's copy is read
// first, so that an unchanged-looking status is never skipped while the
// apiserver holds another one. The merge patch carries the resourceVersion
// it was computed against, so a patch based on a stale copy fails with a
// conflict instead of mixing old and new fields; the reconcile then runs
// again.
func (r *MemcachedReconciler) patchStatus(ctx context.Context, before, mc *cachev1alpha1.Memcached) (bool, error) {
	if r.tracker().mayBeStale(mc.UID, before.ResourceVersion) && r.APIReader != nil {
		fresh := &cachev1alpha1.Memcached{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(mc), fresh); err != nil {
			return false, client.IgnoreNotFound(fmt.Errorf("read status: %w", err))
		}
		if fresh.UID != mc.UID || fresh.Generation != mc.Generation {
			// A newer spec: its own watch event reconciles it.
			return false, nil
		}
		before = fresh
		mc.ResourceVersion = fresh.ResourceVersion
	}
	if equality.Semantic.DeepEqual(before.Status, mc.Status) {
		return false, nil
	}
	r.tracker().writingStatus(mc.UID, &mc.Status)
	err := r.Status().Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case err != nil:
		return false, client.IgnoreNotFound(fmt.Errorf("patch status: %w", err))
	}
	r.tracker().record(mc.UID, mc.ResourceVersion, mc.Status.ObservedGeneration)
	return false, nil
}

func wasPaused(mc *cachev1alpha1.Memcached) bool {
	c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionProgressing)
	return c != nil && c.Reason == cachev1alpha1.ReasonPaused
}

// ignoreCreates drops create events. Every Memcached is reconciled at
// start-up through its own create event, which covers its owned objects.
var ignoreCreates = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

// ownerReferencesChanged passes updates that change an object's owner
// references: a removed owner reference is drift the operator puts back.
var ownerReferencesChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
}}

// event records an event on mc and logs the same line, so `kubectl events`
// and the manager's log tell one story.
func (r *MemcachedReconciler) event(ctx context.Context, mc *cachev1alpha1.Memcached, related runtime.Object, eventType, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if eventType == corev1.EventTypeWarning {
		log.FromContext(ctx).Error(nil, msg, "reason", reason)
	} else {
		log.FromContext(ctx).Info(msg, "reason", reason)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(mc, related, eventType, reason, action, "%s", msg)
	}
}

// changedByOthers passes Memcached updates that the operator did not make
// itself and that change more than the spec: a status edited by hand, a
// finalizer or label added by another client. The operator's own writes are
// recognised by their resourceVersion once their response has arrived, and
// by their content before that (the watch event often comes first): the
// finalizer added, or the status the operator is writing. Without the
// second test half the new Memcacheds were reconciled twice.
func (r *MemcachedReconciler) changedByOthers() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			cur, ok := e.ObjectNew.(*cachev1alpha1.Memcached)
			old, okOld := e.ObjectOld.(*cachev1alpha1.Memcached)
			if !ok || !okOld {
				return true
			}
			if r.tracker().isOwn(cur.UID, cur.ResourceVersion) {
				return false
			}
			return !r.onlyOwnChanges(old, cur)
		},
	}
}

// onlyOwnChanges reports whether cur differs from old only by what the
// operator writes: its finalizer added, the status it is writing.
func (r *MemcachedReconciler) onlyOwnChanges(old, cur *cachev1alpha1.Memcached) bool {
	if old.Generation != cur.Generation || !maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences) || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
		return false
	}
	if !slices.Equal(old.Finalizers, cur.Finalizers) && !onlyOurFinalizerAdded(old.Finalizers, cur.Finalizers) {
		return false
	}
	return equality.Semantic.DeepEqual(old.Status, cur.Status) || r.tracker().wroteStatus(cur.UID, &cur.Status)
}

// onlyOurFinalizerAdded: cur is old with the operator's finalizer added.
func onlyOurFinalizerAdded(old, cur []string) bool {
	ours := func(f string) bool { return f == cachev1alpha1.Finalizer }
	return !slices.ContainsFunc(old, ours) && slices.ContainsFunc(cur, ours) &&
		slices.Equal(slices.DeleteFunc(slices.Clone(cur), ours), old)
}

// SetupWithManager registers the controller. Memcached events pass when the
// spec (generation) or annotations change, or when someone other than the
// operator changed the object (a hand-edited status is put right); the
// operator's own status writes do not trigger reconciles. Owned objects
// trigger the owning Memcached on any change, so status follows the
// Deployment and drift is healed as soon as it happens.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podInstanceIndex, podInstance); err != nil {
		return fmt.Errorf("index pods by instance: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, r.changedByOthers()))).
		// The operator creates its objects itself, so their create events
		// (one per object at start-up, one after every create) only cost a
		// reconcile that finds nothing to do; updates and deletes are what
		// matter: drift, and the Deployment's status.
		Owns(&appsv1.Deployment{}, builder.WithPredicates(ignoreCreates)).
		Owns(&corev1.Service{}, builder.WithPredicates(ignoreCreates)).
		// A budget's status changes with every pod's readiness; only spec and
		// metadata changes can be drift.
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(ignoreCreates, predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			ownerReferencesChanged))).
		// Pods only when a refusal appears, changes or goes away (pods.go).
		Watches(&corev1.Pod{}, podOwner, builder.WithPredicates(podTroubleChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named("memcached").
		Complete(r)
}
