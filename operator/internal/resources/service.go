package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Service returns the headless Service in front of the pods. memcached
// clients shard keys across servers themselves, so they need every pod's
// address (a DNS lookup of the headless name returns them all) rather than a
// load-balanced virtual IP.
func Service(m *cachev1alpha1.Memcached) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(SelectorLabels(m)).
		WithPorts(corev1ac.ServicePort().
			WithName(memcachedPortName).
			WithPort(cachev1alpha1.MemcachedPort).
			WithTargetPort(intstr.FromString(memcachedPortName)).
			WithProtocol(corev1.ProtocolTCP))
	if t := tlsSpec(m); t != nil && t.PlaintextPort != nil {
		spec.WithPorts(corev1ac.ServicePort().
			WithName(plainPortName).
			WithPort(*t.PlaintextPort).
			WithTargetPort(intstr.FromString(plainPortName)).
			WithProtocol(corev1.ProtocolTCP))
	}
	if exporterSpec(m) != nil {
		spec.WithPorts(corev1ac.ServicePort().
			WithName(metricsPortName).
			WithPort(cachev1alpha1.ExporterPort).
			WithTargetPort(intstr.FromString(metricsPortName)).
			WithProtocol(corev1.ProtocolTCP))
	}
	return withDesiredHash(corev1ac.Service(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec))
}
