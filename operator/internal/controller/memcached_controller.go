// Package controller holds the Memcached reconciler.
//
// A reconcile reads the Memcached and its owned objects from the cache, asks
// package resources for the desired objects, creates the missing ones,
// server-side applies the ones that differ, deletes the ones no longer wanted, and patches status once at the
// end. It never writes when nothing changed: unchanged objects are not
// applied and an unchanged status is not patched. The cache holds
// Deployments without their pod templates (cache.go); a template is read from
// the apiserver only when its fingerprint is not one the operator verified
// (templates.go, apply.go).
//
// One concern per file: memcached_controller.go the reconciler and its
// watches, owned.go reading, applying and deleting the owned objects,
// apply.go the create and the server-side apply themselves, status.go the
// conditions and the status patch, pods.go the server list and why pods cannot run,
// predicates.go which events reach the reconciler, events.go the events it
// records, finalizer.go and uninstall.go deletion, writes.go and
// templates.go what the operator remembers of its own writes, warmup.go how
// a new leader fills that record, cache.go what the informers hold.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/metrics"
	"github.com/example/memcached-operator/operator/internal/resources"
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
	// Namespaces are the watched namespaces, as the cache is given them;
	// none means all.
	Namespaces []string

	// The write tracker and the template record are made on first use, by
	// whichever of the workers comes first, so under a sync.Once each.
	writesOnce    sync.Once
	writes        *ownWrites
	templatesOnce sync.Once
	verified      *verifiedTemplates
}

// The RBAC below is all the operator gets. It reads pods (never writes
// them) for the server list and why one cannot run (pods.go), and its own
// pod's image for the reloader sidecar (cmd/main.go). It reads Secrets
// only to check the ones a spec.security names (security.go): it watches
// their metadata and GETs their content, so no Secret's content stays in
// its memory.
//
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
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
	after, err := r.reconcile(ctx, before, mc)
	return ctrl.Result{RequeueAfter: after}, err
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

// reconcile returns when to look again although nothing changed (a
// certificate nearing its end), or zero.
func (r *MemcachedReconciler) reconcile(ctx context.Context, before, mc *cachev1alpha1.Memcached) (time.Duration, error) {
	cur, err := r.readOwned(ctx, mc, false)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	security, err := r.checkSecurity(ctx, mc, now)
	if err != nil {
		return 0, err
	}
	defer summarizeSecurity(mc, security, now)

	if mc.Spec.Paused {
		if err := r.ensureFinalizer(ctx, before, mc); err != nil {
			return 0, err
		}
		if !wasPaused(before) {
			r.event(ctx, mc, nil, corev1.EventTypeNormal, EventPaused, "Pause", "spec.paused is true: owned objects are left as they are")
		}
		pods, err := r.observePods(ctx, mc, cur.liveWorkload())
		if err != nil {
			return 0, err
		}
		summarize(mc, cur.liveWorkload(), pods, nil)
		return security.recheckAfter(now), nil
	}
	if wasPaused(before) {
		r.event(ctx, mc, nil, corev1.EventTypeNormal, EventResumed, "Resume", "spec.paused is false: reconciling owned objects again")
	}

	if security.problem != nil {
		// A Secret memcached cannot load would make every new pod exit at
		// start: the owned objects stay as they are until it is fixed,
		// and the Secret's watch brings the fix here. No error, so no
		// retries that cannot help.
		pods, err := r.observePods(ctx, mc, cur.liveWorkload())
		summarize(mc, cur.liveWorkload(), pods, security.problem)
		return 0, err
	}
	applyErr := r.applyOwned(ctx, before, mc, cur)
	pods, err := r.observePods(ctx, mc, cur.liveWorkload())
	summarize(mc, cur.liveWorkload(), pods, applyErr)
	return security.recheckAfter(now), errors.Join(applyErr, err)
}

// observePods reads what mc's pods say: the server list always, and why
// pods cannot run while its workload has pods that are not ready or not
// updated (a workload with all its pods ready has nothing to explain).
func (r *MemcachedReconciler) observePods(ctx context.Context, mc *cachev1alpha1.Memcached, workload client.Object) (podsReport, error) {
	if workload == nil {
		return podsReport{}, nil
	}
	reason, _ := rollout(workloadOf(workload), mc.GetSize())
	return r.readPods(ctx, mc, reason != "" && mc.GetSize() > 0)
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
	r.templates().warmingUp()
	if err := mgr.Add(templateWarmUp{r: r, namespaces: r.Namespaces}); err != nil {
		return fmt.Errorf("add the template warm-up: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podInstanceIndex, podInstance); err != nil {
		return fmt.Errorf("index pods by instance: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cachev1alpha1.Memcached{}, secretNamesIndex, secretNames); err != nil {
		return fmt.Errorf("index Memcacheds by Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, r.changedByOthers()))).
		// The operator creates its objects itself, so their create events
		// (one per object at start-up, one after every create) only cost a
		// reconcile that finds nothing to do; updates and deletes are what
		// matter: drift, and the Deployment's status.
		Owns(&appsv1.Deployment{}, builder.WithPredicates(ignoreCreates)).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(ignoreCreates)).
		Owns(&corev1.Service{}, builder.WithPredicates(ignoreCreates)).
		// A budget's status changes with every pod's readiness; only spec and
		// metadata changes can be drift.
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(ignoreCreates, predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			ownerReferencesChanged))).
		// Pods only when a server or a refusal appears, changes or goes away
		// (pods.go).
		Watches(&corev1.Pod{}, podOwner, builder.WithPredicates(podChanged)).
		// Secrets by metadata only: a change of one that a spec.security
		// names re-checks it (security.go).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.memcachedsForSecret), builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named("memcached").
		Complete(r)
}
