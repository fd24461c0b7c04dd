package resources

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// PodDisruptionBudget returns the budget that limits voluntary evictions, or
// nil when none is wanted: explicitly disabled, or left unset with a single
// pod (a budget over one pod would block every node drain).
func PodDisruptionBudget(m *cachev1alpha1.Memcached) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	var cfg cachev1alpha1.PodDisruptionBudgetSpec
	if m.Spec.HighAvailability != nil && m.Spec.HighAvailability.PodDisruptionBudget != nil {
		cfg = *m.Spec.HighAvailability.PodDisruptionBudget
	}
	if !wantPodDisruptionBudget(m, cfg) {
		return nil
	}

	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
		// A cache pod that is stuck unready serves nothing; let drains evict it.
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	switch {
	case cfg.MinAvailable != nil:
		spec.WithMinAvailable(*cfg.MinAvailable)
	case cfg.MaxUnavailable != nil:
		spec.WithMaxUnavailable(*cfg.MaxUnavailable)
	default:
		spec.WithMaxUnavailable(intstr.FromInt32(1))
	}

	return withDesiredHash(policyv1ac.PodDisruptionBudget(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec))
}

func wantPodDisruptionBudget(m *cachev1alpha1.Memcached, cfg cachev1alpha1.PodDisruptionBudgetSpec) bool {
	if cfg.Enabled != nil {
		return *cfg.Enabled
	}
	return m.GetSize() > 1
}
