package controller

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// deployment returns a Deployment of want pods whose status the caller shapes.
func deployment(want int32, status func(*appsv1.DeploymentStatus)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2,
			Replicas:           want, UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
		},
	}
	if status != nil {
		status(&d.Status)
	}
	return d
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name       string
		paused     bool
		dep        *appsv1.Deployment
		pods       podsReport
		applyErr   error
		wantReady  metav1.ConditionStatus
		wantReason string
		// wantMessage is a part of the Ready message, when set.
		wantMessage string
		want        map[string]metav1.ConditionStatus
	}{
		{
			name: "no Deployment yet", dep: nil,
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonWaitingForDeployment,
			want: map[string]metav1.ConditionStatus{"Available": "False", "Progressing": "True", "Degraded": "False", "Stalled": "False"},
		},
		{
			name: "all pods ready", dep: deployment(3, nil),
			wantReady: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonReady,
			want: map[string]metav1.ConditionStatus{"Available": "True", "Progressing": "False", "Degraded": "False"},
		},
		{
			name: "Deployment controller behind", dep: deployment(3, func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 1 }),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonWaitingForDeployment,
		},
		{
			name: "rolling out", dep: deployment(3, func(s *appsv1.DeploymentStatus) { s.UpdatedReplicas = 1 }),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonRollingOut,
		},
		{
			name: "old pods terminating", dep: deployment(3, func(s *appsv1.DeploymentStatus) { s.Replicas = 4 }),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonRollingOut,
		},
		{
			name: "pods not ready", dep: deployment(3, func(s *appsv1.DeploymentStatus) { s.ReadyReplicas = 2 }),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonScaling,
		},
		{
			name: "Deployment asks for another size", dep: deployment(2, nil),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonScaling,
		},
		{
			name: "rollout deadline exceeded",
			dep: deployment(3, func(s *appsv1.DeploymentStatus) {
				s.UpdatedReplicas = 1
				s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "x" has timed out progressing.`,
				})
			}),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonProgressDeadlineExceeded,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True"},
		},
		{
			name: "the cluster refuses to create pods",
			dep: deployment(3, func(s *appsv1.DeploymentStatus) {
				s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = 0, 0, 0, 0
				s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
					Message: `pods "x-1" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0`,
				})
			}),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonReplicaFailure,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True"},
		},
		{
			name:      "the kubelet refuses a pod",
			dep:       deployment(3, func(s *appsv1.DeploymentStatus) { s.ReadyReplicas, s.AvailableReplicas = 2, 2 }),
			pods:      podsReport{reason: cachev1alpha1.ReasonPodsFailing, message: "1 of 3 pods cannot run; pod m-x, container memcached: CreateContainerConfigError: container has runAsNonRoot and image will run as root"},
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonPodsFailing, wantMessage: "will run as root",
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "False", "Progressing": "True", "Available": "True"},
		},
		{
			name: "refused pods past the rollout deadline stall, with the pods' reason",
			dep: deployment(3, func(s *appsv1.DeploymentStatus) {
				s.ReadyReplicas = 2
				s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "x" has timed out progressing.`,
				})
			}),
			pods:      podsReport{reason: cachev1alpha1.ReasonPodsUnschedulable, message: "1 of 3 pods cannot run; pod m-x cannot be scheduled: 0/2 nodes are available"},
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonProgressDeadlineExceeded,
			wantMessage: `has timed out progressing. 1 of 3 pods cannot run; pod m-x cannot be scheduled`,
			want:        map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True"},
		},
		{
			name: "apply failed for a reason that may pass", dep: deployment(3, nil), applyErr: errors.New("the server was unable to return a response in the time allotted"),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonApplyFailed,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "False", "Available": "True"},
		},
		{
			name: "apply rejected as invalid", dep: deployment(3, nil),
			applyErr:  fmt.Errorf("apply Deployment m: %w", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "m", nil)),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonInvalid,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True", "Available": "True"},
		},
		{
			name: "apply forbidden", dep: deployment(3, nil),
			applyErr:  errors.Join(nil, fmt.Errorf("apply Deployment m: %w", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "m", errors.New("RBAC")))),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonForbidden,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True"},
		},
		{
			name: "a Service of that name belongs to someone else", dep: deployment(3, nil),
			applyErr:  errors.Join(&resourceExistsError{kind: "Service", name: "m"}),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonResourceExists,
			want: map[string]metav1.ConditionStatus{"Degraded": "True", "Stalled": "True"},
		},
		{
			name: "paused and in place", paused: true, dep: deployment(3, nil),
			wantReady: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonPaused,
			want: map[string]metav1.ConditionStatus{"Progressing": "False"},
		},
		{
			name: "paused while drifted", paused: true, dep: deployment(1, nil),
			wantReady: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonPaused,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.pods.servers = []string{"10.0.0.1:11211"}
			mc := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 7},
				Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), Paused: tt.paused},
			}
			summarize(mc, tt.dep, tt.pods, tt.applyErr)

			g.Expect(mc.Status.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(mc.Status.ServerList).To(Equal([]string{"10.0.0.1:11211"}))
			g.Expect(mc.Status.Conditions).To(HaveLen(5))
			for _, c := range mc.Status.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(int64(7)))
				g.Expect(c.Message).NotTo(BeEmpty())
			}
			ready := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionReady)
			g.Expect(ready.Status).To(Equal(tt.wantReady))
			g.Expect(ready.Reason).To(Equal(tt.wantReason))
			g.Expect(ready.Message).To(ContainSubstring(tt.wantMessage))
			for condType, status := range tt.want {
				g.Expect(meta.FindStatusCondition(mc.Status.Conditions, condType).Status).To(Equal(status), condType)
			}
		})
	}
}

// Summarizing the same observation twice yields an identical status: the
// precondition for a steady-state reconcile to skip the status patch.
func TestSummarizeIsStable(t *testing.T) {
	g := NewWithT(t)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 1}}
	summarize(mc, deployment(1, nil), podsReport{}, nil)
	first := mc.Status.DeepCopy()
	summarize(mc, deployment(1, nil), podsReport{}, nil)
	g.Expect(mc.Status).To(Equal(*first))
}
