// Package controller holds the Memcached reconciler.
//
// A reconcile reads the Memcached and its owned objects from the cache, asks
// package resources for the desired objects, server-side applies the ones that
// differ, deletes the ones no longer wanted, and patches status once at the
// end. It never writes when nothing changed: unchanged objects are not
// applied and an unchanged status is not patched.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Event reasons. Every change the operator makes is reported as an event on
// the Memcached, with the changed object as the related object.
const (
	EventCreated      = "Created"
	EventUpdated      = "Updated"
	EventScaled       = "Scaled"
	EventDeleted      = "Deleted"
	EventPaused       = "Paused"
	EventResumed      = "Resumed"
	EventApplyFailed  = "ApplyFailed"
	EventDeleteFailed = "DeleteFailed"
)

// MemcachedReconciler reconciles Memcached objects.
type MemcachedReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Defaults fills what a Memcached leaves unset (images).
	Defaults resources.Options
	// MaxConcurrentReconciles is the number of Memcacheds reconciled in
	// parallel. Zero means one.
	MaxConcurrentReconciles int
}

// The RBAC below is all the operator gets. It never reads Secrets or Pods:
// status comes from the Deployment's own status.
//
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one Memcached towards its spec and reports what it sees.
// Returned errors are retried by controller-runtime with per-object
// exponential backoff (5ms doubling up to ~16 minutes), so a persistent
// failure never becomes a hot loop.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !mc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, mc)
	}

	before := mc.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, mc); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	return ctrl.Result{}, r.reconcile(ctx, before, mc)
}

// owned is what the cache holds of the objects a Memcached owns. A missing
// object is represented by exists=false and an empty object.
type owned struct {
	deployment    appsv1.Deployment
	service       corev1.Service
	pdb           policyv1.PodDisruptionBudget
	hasDeployment bool
	hasService    bool
	hasPDB        bool
}

func (r *MemcachedReconciler) reconcile(ctx context.Context, before, mc *cachev1alpha1.Memcached) error {
	cur, err := r.readOwned(ctx, mc)
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
		summarize(mc, deploymentOrNil(cur), nil)
		return nil
	}
	if wasPaused(before) {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventResumed, "Resume", "spec.paused is false: reconciling owned objects again")
	}

	applyErr := r.applyOwned(ctx, before, mc, cur)
	summarize(mc, deploymentOrNil(cur), applyErr)
	return applyErr
}

func (r *MemcachedReconciler) readOwned(ctx context.Context, mc *cachev1alpha1.Memcached) (*owned, error) {
	cur := &owned{}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	var err error
	if cur.hasDeployment, err = r.getOwned(ctx, mc, key, &cur.deployment); err != nil {
		return nil, err
	}
	if cur.hasService, err = r.getOwned(ctx, mc, key, &cur.service); err != nil {
		return nil, err
	}
	if cur.hasPDB, err = r.getOwned(ctx, mc, key, &cur.pdb); err != nil {
		return nil, err
	}
	return cur, nil
}

// getOwned reads obj from the cache. An object of the same name that this
// Memcached does not control is reported as missing; applying over it then
// fails on the controller reference instead of silently taking it over.
func (r *MemcachedReconciler) getOwned(ctx context.Context, mc *cachev1alpha1.Memcached, key types.NamespacedName, obj client.Object) (bool, error) {
	if err := r.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return metav1.IsControlledBy(obj, mc), nil
}

func deploymentOrNil(cur *owned) *appsv1.Deployment {
	if !cur.hasDeployment {
		return nil
	}
	return &cur.deployment
}

// applyOwned adds the finalizer and applies the Deployment, Service and
// PodDisruptionBudget, all at once: they are independent requests, and a
// reconcile that waited for each in turn would spend most of its time in
// round trips. It deletes the budget when it is no longer wanted, and carries
// on after a failure so that one rejected object does not hold back the
// others.
func (r *MemcachedReconciler) applyOwned(ctx context.Context, before, mc *cachev1alpha1.Memcached, cur *owned) error {
	type outcome struct {
		kind    string
		changed bool
		existed bool
		err     error
	}
	oldReplicas := ptr.Deref(cur.deployment.Spec.Replicas, 0)
	deployment, service, pdb := resources.Deployment(mc, r.Defaults), resources.Service(mc), resources.PodDisruptionBudget(mc)
	outcomes := make([]outcome, 3)
	var finalizerErr error
	var wg sync.WaitGroup
	apply := func(i int, kind string, desired runtime.ApplyConfiguration, live client.Object, exists bool) {
		wg.Go(func() {
			changed, err := r.applyIfChanged(ctx, desired, live, exists)
			outcomes[i] = outcome{kind: kind, changed: changed, existed: exists, err: err}
		})
	}
	if !controllerutil.ContainsFinalizer(mc, cachev1alpha1.Finalizer) {
		wg.Go(func() { finalizerErr = r.ensureFinalizer(ctx, before, mc) })
	}
	apply(0, "Deployment", deployment, &cur.deployment, cur.hasDeployment)
	apply(1, "Service", service, &cur.service, cur.hasService)
	if pdb != nil {
		apply(2, "PodDisruptionBudget", pdb, &cur.pdb, cur.hasPDB)
	}
	wg.Wait()

	errs := []error{finalizerErr}
	var created, updated []string
	for _, o := range outcomes {
		switch {
		case o.kind == "" || (!o.changed && o.err == nil):
		case o.err != nil:
			errs = append(errs, r.applyFailed(ctx, mc, o.kind, o.err))
		case o.existed:
			updated = append(updated, o.kind)
		default:
			created = append(created, o.kind)
		}
	}
	if o := outcomes[0]; o.err == nil {
		cur.hasDeployment = cur.hasDeployment || o.changed
		if o.changed && o.existed && oldReplicas != mc.GetSize() {
			r.event(ctx, mc, &cur.deployment, corev1.EventTypeNormal, EventScaled, "Scale",
				"scaled Deployment %s from %d to %d pods", mc.Name, oldReplicas, mc.GetSize())
		}
	}
	if pdb == nil && cur.hasPDB {
		if err := r.deleteOwned(ctx, mc, &cur.pdb); err != nil {
			errs = append(errs, err)
		} else {
			r.event(ctx, mc, &cur.pdb, corev1.EventTypeNormal, EventDeleted, "Delete",
				"deleted PodDisruptionBudget %s: it is no longer wanted", cur.pdb.Name)
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
		err = fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
		r.event(ctx, mc, obj, corev1.EventTypeWarning, EventDeleteFailed, "Delete", "%s", err.Error())
		return err
	}
	return nil
}

// patchStatus writes status if the reconcile changed it. A merge patch
// without a resourceVersion precondition cannot conflict: the operator is
// the only writer of this status.
func (r *MemcachedReconciler) patchStatus(ctx context.Context, before, mc *cachev1alpha1.Memcached) error {
	if equality.Semantic.DeepEqual(before.Status, mc.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, mc, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patch status: %w", err))
	}
	return nil
}

func wasPaused(mc *cachev1alpha1.Memcached) bool {
	c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionProgressing)
	return c != nil && c.Reason == cachev1alpha1.ReasonPaused
}

// ignoreCreates drops create events. Every Memcached is reconciled at
// start-up through its own create event, which covers its owned objects.
var ignoreCreates = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

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

// SetupWithManager registers the controller. Memcached events pass only when
// the spec (generation) or annotations change; status updates of the
// operator's own writes do not trigger reconciles. Owned objects trigger the
// owning Memcached on any change, so status follows the Deployment and drift
// is healed as soon as it happens.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// The operator creates its objects itself, so their create events
		// (one per object at start-up, one after every create) only cost a
		// reconcile that finds nothing to do; updates and deletes are what
		// matter: drift, and the Deployment's status.
		Owns(&appsv1.Deployment{}, builder.WithPredicates(ignoreCreates)).
		Owns(&corev1.Service{}, builder.WithPredicates(ignoreCreates)).
		// A budget's status changes with every pod's readiness; only spec and
		// metadata changes can be drift.
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(ignoreCreates, predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named("memcached").
		Complete(r)
}
