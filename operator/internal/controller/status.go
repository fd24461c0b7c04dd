package controller

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// summarize writes mc.Status from the Deployment as the apiserver holds it
// (nil when it does not exist), from its pods' trouble and from the outcome
// of this reconcile. It is pure: the same inputs give the same status, so a
// reconcile that finds nothing new produces an identical status and no
// write.
func summarize(mc *cachev1alpha1.Memcached, dep *appsv1.Deployment, pods podsReport, applyErr error) {
	gen := mc.Generation
	size := mc.GetSize()

	mc.Status.ObservedGeneration = gen
	mc.Status.Selector = resources.Selector(mc)
	mc.Status.Endpoint = mc.Endpoint()
	mc.Status.ServerList = pods.servers
	mc.Status.Replicas, mc.Status.ReadyReplicas = 0, 0
	if dep != nil {
		mc.Status.Replicas = dep.Status.Replicas
		mc.Status.ReadyReplicas = dep.Status.ReadyReplicas
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

	if dep == nil {
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, "The Deployment does not exist.")
	} else if c := deploymentCondition(dep, appsv1.DeploymentAvailable); c != nil && c.Status == corev1.ConditionTrue {
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable, fmt.Sprintf("%d of %d pods are available.", dep.Status.AvailableReplicas, size))
	} else {
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, fmt.Sprintf("%d of %d pods are available.", dep.Status.AvailableReplicas, size))
	}

	rolloutReason, rolloutMessage := rollout(dep, size)
	switch {
	case mc.Spec.Paused:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, cachev1alpha1.ReasonPaused, "spec.paused is true: the operator leaves the Deployment, Service and PodDisruptionBudget as they are.")
	case rolloutReason != "":
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, rolloutReason, rolloutMessage)
	default:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, cachev1alpha1.ReasonComplete, "The Deployment matches the spec.")
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
func degraded(dep *appsv1.Deployment, pods podsReport, applyErr error) (reason, message string, stalled bool) {
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
	if c := deploymentCondition(dep, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
		return cachev1alpha1.ReasonReplicaFailure, fmt.Sprintf("The Deployment cannot create pods: %s", c.Message), true
	}
	if c := deploymentCondition(dep, appsv1.DeploymentProgressing); c != nil &&
		c.Status == corev1.ConditionFalse && c.Reason == cachev1alpha1.ReasonProgressDeadlineExceeded {
		if pods.reason != "" {
			return cachev1alpha1.ReasonProgressDeadlineExceeded, c.Message + " " + pods.message, true
		}
		return cachev1alpha1.ReasonProgressDeadlineExceeded, c.Message, true
	}
	if pods.reason != "" {
		return pods.reason, pods.message, false
	}
	return "", "", false
}

// rollout returns a reason and message while the Deployment has not reached
// size updated, ready pods and nothing else; empty strings when it has.
func rollout(dep *appsv1.Deployment, size int32) (string, string) {
	switch s := dep; {
	case s == nil:
		return cachev1alpha1.ReasonWaitingForDeployment, "The Deployment does not exist yet."
	case s.Status.ObservedGeneration < s.Generation:
		return cachev1alpha1.ReasonWaitingForDeployment, fmt.Sprintf("The Deployment controller has not yet observed generation %d of the Deployment.", s.Generation)
	case s.Spec.Replicas != nil && *s.Spec.Replicas != size:
		return cachev1alpha1.ReasonScaling, fmt.Sprintf("The Deployment asks for %d pods, the spec for %d.", *s.Spec.Replicas, size)
	case s.Status.UpdatedReplicas < size:
		return cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d pods run the current pod template.", s.Status.UpdatedReplicas, size)
	case s.Status.Replicas > size:
		return cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d old pods are still terminating.", s.Status.Replicas-size)
	case s.Status.ReadyReplicas < size || s.Status.AvailableReplicas < size:
		return cachev1alpha1.ReasonScaling, fmt.Sprintf("%d of %d pods are ready.", s.Status.ReadyReplicas, size)
	}
	return "", ""
}

func deploymentCondition(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range dep.Status.Conditions {
		if dep.Status.Conditions[i].Type == t {
			return &dep.Status.Conditions[i]
		}
	}
	return nil
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
