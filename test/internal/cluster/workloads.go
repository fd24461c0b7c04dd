package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Eventually retries check until it returns nil or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MarkDeploymentReady plays the Deployment controller, which envtest does
// not run: once the Deployment exists, all its replicas are reported
// updated, ready and available for its current generation.
func MarkDeploymentReady(t testing.TB, c client.Client, namespace, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, "Deployment "+namespace+"/"+name+" to be markable ready", func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		n := int32(1)
		if d.Spec.Replicas != nil {
			n = *d.Spec.Replicas
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		return c.Status().Update(context.Background(), d)
	})
}

// MarkDisruptionBudgetHealthy plays the disruption controller for a budget.
func MarkDisruptionBudgetHealthy(t testing.TB, c client.Client, namespace, name string, healthy int32) {
	t.Helper()
	Eventually(t, 30*time.Second, "PodDisruptionBudget "+namespace+"/"+name+" to be markable healthy", func() error {
		p := &policyv1.PodDisruptionBudget{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, p); err != nil {
			return err
		}
		p.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: p.Generation,
			CurrentHealthy:     healthy, DesiredHealthy: healthy, ExpectedPods: healthy,
			DisruptionsAllowed: 1,
			Conditions: []metav1.Condition{{
				Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue,
				Reason: policyv1.SufficientPodsReason, LastTransitionTime: metav1.Now(),
			}},
		}
		if err := c.Status().Update(context.Background(), p); err != nil {
			return fmt.Errorf("update status: %w", err)
		}
		return nil
	})
}
