package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
	"github.com/example/memcached-operator/operator/internal/secretcheck"
)

// podsReport is what a Memcached's pods say: the ready servers
// (serverList) and why pods cannot run (podsTrouble); reason is empty when
// none is troubled or trouble was not asked for.
type podsReport struct {
	servers         []string
	reason, message string
}

// summarize writes mc.Status from the workload (Deployment or StatefulSet)
// as the apiserver holds it (nil when it does not exist), from its pods'
// trouble and from the outcome
// of this reconcile. It is pure: the same inputs give the same status, so a
// reconcile that finds nothing new produces an identical status and no
// write.
func summarize(mc *cachev1alpha1.Memcached, workload client.Object, pods podsReport, applyErr error) {
	dep := workloadOf(workload)
	gen := mc.Generation
	size := mc.GetSize()

	mc.Status.ObservedGeneration = gen
	mc.Status.Selector = resources.Selector(mc)
	mc.Status.Endpoint = mc.Endpoint()
	mc.Status.ServerList = pods.servers
	mc.Status.Replicas, mc.Status.ReadyReplicas = 0, 0
	if dep != nil {
		mc.Status.Replicas = dep.replicas
		mc.Status.ReadyReplicas = dep.ready
	}

	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
			Type:               condType,
			Status:             status,
			Reason:             reason,
			Message:            message,
			ObservedGeneration: gen,
		})
	}

	degradedReason, degradedMessage, stalled := degraded(dep, pods, applyErr)
	if degradedReason != "" {
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, degradedReason, degradedMessage)
	} else {
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected, "The owned objects are accepted and the rollout is within its deadline.")
	}
	if stalled {
		set(cachev1alpha1.ConditionStalled, metav1.ConditionTrue, degradedReason, degradedMessage)
	} else {
		set(cachev1alpha1.ConditionStalled, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected, "Nothing blocks progress.")
	}

	switch {
	case dep == nil:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, fmt.Sprintf("The %s does not exist.", workloadKind(mc)))
	case dep.availableOK:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable, fmt.Sprintf("%d of %d pods are available.", dep.available, size))
	default:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, fmt.Sprintf("%d of %d pods are available.", dep.available, size))
	}

	rolloutReason, rolloutMessage := rollout(dep, size)
	if dep == nil {
		rolloutMessage = fmt.Sprintf("The %s does not exist yet.", workloadKind(mc))
	}
	switch {
	case mc.Spec.Paused:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, cachev1alpha1.ReasonPaused, fmt.Sprintf("spec.paused is true: the operator leaves the %s, Service and PodDisruptionBudget as they are.", workloadKind(mc)))
	case rolloutReason != "":
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, rolloutReason, rolloutMessage)
	default:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, cachev1alpha1.ReasonComplete, fmt.Sprintf("The %s matches the spec.", workloadKind(mc)))
	}

	switch {
	case degradedReason != "":
		set(cachev1alpha1.ConditionReady, metav1.ConditionFalse, degradedReason, degradedMessage)
	case mc.Spec.Paused:
		status := metav1.ConditionFalse
		if rolloutReason == "" {
			status = metav1.ConditionTrue
		}
		set(cachev1alpha1.ConditionReady, status, cachev1alpha1.ReasonPaused, fmt.Sprintf("Paused with %d of %d pods ready.", mc.Status.ReadyReplicas, size))
	case rolloutReason != "":
		set(cachev1alpha1.ConditionReady, metav1.ConditionFalse, rolloutReason, rolloutMessage)
	default:
		set(cachev1alpha1.ConditionReady, metav1.ConditionTrue, cachev1alpha1.ReasonReady, fmt.Sprintf("%d of %d pods are ready at %s.", mc.Status.ReadyReplicas, size, mc.Status.Endpoint))
	}
}

// degraded returns a reason and message when the spec cannot be realised,
// and whether the operator is stalled: it cannot make progress until someone
// changes the spec or the cluster. An apply rejected as invalid or
// forbidden, a name taken by someone else's object, pods the cluster refuses
// to create and an exceeded rollout deadline stall; other apply errors
// (timeouts, conflicts, an apiserver restart) only degrade, since a retry
// may pass. So do pods the scheduler or the kubelet refuses: both retry on
// their own, until the rollout deadline turns it into a stall, whose
// message then carries the pods' reason too.
func degraded(dep *workloadState, pods podsReport, applyErr error) (reason, message string, stalled bool) {
	if applyErr != nil {
		var taken *resourceExistsError
		var secret *secretcheck.Problem
		switch {
		case errors.As(applyErr, &secret):
			return secret.Reason, secret.Message, true
		case errors.As(applyErr, &taken):
			return cachev1alpha1.ReasonResourceExists, applyErr.Error(), true
		case apierrors.IsForbidden(applyErr):
			return cachev1alpha1.ReasonForbidden, applyErr.Error(), true
		case apierrors.IsInvalid(applyErr) || apierrors.IsBadRequest(applyErr):
			return cachev1alpha1.ReasonInvalid, applyErr.Error(), true
		}
		return cachev1alpha1.ReasonApplyFailed, applyErr.Error(), false
	}
	if dep == nil {
		return "", "", false
	}
	if dep.replicaFailure != "" {
		return cachev1alpha1.ReasonReplicaFailure, fmt.Sprintf("The %s cannot create pods: %s", dep.kind, dep.replicaFailure), true
	}
	if dep.progressDeadlineMessage != "" {
		if pods.reason != "" {
			return cachev1alpha1.ReasonProgressDeadlineExceeded, dep.progressDeadlineMessage + " " + pods.message, true
		}
		return cachev1alpha1.ReasonProgressDeadlineExceeded, dep.progressDeadlineMessage, true
	}
	if pods.reason != "" {
		return pods.reason, pods.message, false
	}
	return "", "", false
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
	// The patch is computed from the typed objects but sent through a
	// metadata-only object, so the apiserver answers with the Memcached's
	// metadata: the reconcile needs the new resourceVersion, not the
	// status it just sent decoded back from JSON.
	patch, err := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}).Data(mc)
	if err != nil {
		return false, fmt.Errorf("patch status: %w", err)
	}
	written, err := r.emptyMetadata(mc)
	if err != nil {
		return false, fmt.Errorf("patch status: %w", err)
	}
	written.SetNamespace(mc.Namespace)
	written.SetName(mc.Name)
	r.tracker().writingStatus(mc.UID, &mc.Status)
	err = r.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case err != nil:
		return false, client.IgnoreNotFound(fmt.Errorf("patch status: %w", err))
	}
	mc.ResourceVersion = written.ResourceVersion
	r.tracker().record(mc.UID, mc.ResourceVersion, mc.Status.ObservedGeneration)
	return false, nil
}

func wasPaused(mc *cachev1alpha1.Memcached) bool {
	c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionProgressing)
	return c != nil && c.Reason == cachev1alpha1.ReasonPaused
}

// workloadKind is the kind of the workload that runs mc's pods.
func workloadKind(mc *cachev1alpha1.Memcached) string {
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		return "StatefulSet"
	}
	return "Deployment"
}
