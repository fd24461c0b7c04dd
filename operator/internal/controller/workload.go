package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// workloadState is what the status reads of the workload that runs the
// pods, a Deployment or a StatefulSet, in the terms both share.
type workloadState struct {
	kind                                    string
	generation, observedGeneration          int64
	specReplicas                            int32
	replicas, ready, updated, available     int32
	availableOK                             bool
	replicaFailure, progressDeadlineMessage string
}

// workloadOf reads obj, a Deployment or a StatefulSet; nil (or a typed
// nil) gives nil.
func workloadOf(obj client.Object) *workloadState {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		if w == nil {
			return nil
		}
		s := &workloadState{
			kind: "Deployment", generation: w.Generation, observedGeneration: w.Status.ObservedGeneration,
			specReplicas: ptr.Deref(w.Spec.Replicas, 1),
			replicas:     w.Status.Replicas, ready: w.Status.ReadyReplicas, updated: w.Status.UpdatedReplicas, available: w.Status.AvailableReplicas,
		}
		if c := deploymentCondition(w, appsv1.DeploymentAvailable); c != nil && c.Status == corev1.ConditionTrue {
			s.availableOK = true
		}
		if c := deploymentCondition(w, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			s.replicaFailure = c.Message
		}
		if c := deploymentCondition(w, appsv1.DeploymentProgressing); c != nil &&
			c.Status == corev1.ConditionFalse && c.Reason == cachev1alpha1.ReasonProgressDeadlineExceeded {
			s.progressDeadlineMessage = c.Message
		}
		return s
	case *appsv1.StatefulSet:
		if w == nil {
			return nil
		}
		s := &workloadState{
			kind: "StatefulSet", generation: w.Generation, observedGeneration: w.Status.ObservedGeneration,
			specReplicas: ptr.Deref(w.Spec.Replicas, 1),
			replicas:     w.Status.Replicas, ready: w.Status.ReadyReplicas, updated: w.Status.UpdatedReplicas, available: w.Status.AvailableReplicas,
		}
		// A StatefulSet has no Available condition. Its rolling update
		// takes down one pod at a time, so it is available as a
		// Deployment with maxUnavailable 1 would be: at most one pod short.
		s.availableOK = s.available >= s.specReplicas-1
		// When every pod runs the update revision, the StatefulSet
		// controller sets currentRevision to it; until then a pod of the
		// old revision may still count as updated in no field at all.
		if w.Status.CurrentRevision != w.Status.UpdateRevision && s.updated >= s.specReplicas {
			s.updated = s.specReplicas - 1
		}
		return s
	}
	return nil
}

// rollout returns a reason and message while the workload has not reached
// size updated, ready pods and nothing else; empty strings when it has.
func rollout(w *workloadState, size int32) (string, string) {
	switch {
	case w == nil:
		return cachev1alpha1.ReasonWaitingForDeployment, "The Deployment does not exist yet."
	case w.observedGeneration < w.generation:
		return cachev1alpha1.ReasonWaitingForDeployment, fmt.Sprintf("The %s controller has not yet observed generation %d of the %s.", w.kind, w.generation, w.kind)
	case w.specReplicas != size:
		return cachev1alpha1.ReasonScaling, fmt.Sprintf("The %s asks for %d pods, the spec for %d.", w.kind, w.specReplicas, size)
	case w.updated < size:
		return cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d pods run the current pod template.", w.updated, size)
	case w.replicas > size:
		return cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d old pods are still terminating.", w.replicas-size)
	case w.ready < size || w.available < size:
		return cachev1alpha1.ReasonScaling, fmt.Sprintf("%d of %d pods are ready.", w.ready, size)
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
