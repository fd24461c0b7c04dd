// Package monitoring defines the operator's prometheus-operator objects
// with prometheus-operator's own Go API, so that they are typed and
// checked by its compiler instead of written by hand; `make manifests`
// writes them into deploy/prometheus (generate prometheus): the manager's
// ServiceMonitor and one PodMonitor for every cache's exporter
// (monitor.yaml), and the alerts (alerts/rules.yaml, a component).
package monitoring

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ManagerServiceMonitor scrapes the manager's metrics Service over HTTPS
// with the Prometheus pod's ServiceAccount token, which the manager checks
// with a TokenReview and a SubjectAccessReview: bind Prometheus'
// ServiceAccount to the metrics-reader ClusterRole. The manager serves a
// self-signed certificate (controller-runtime's default), so the
// certificate is not verified; the token still is, by the manager.
func ManagerServiceMonitor() *monitoringv1.ServiceMonitor {
	https := monitoringv1.SchemeHTTPS
	return &monitoringv1.ServiceMonitor{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.ServiceMonitorsKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "memcached-operator-controller-manager-metrics-monitor",
			Namespace: "memcached-operator-system",
			Labels:    map[string]string{"control-plane": "controller-manager"},
		},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "controller-manager"}},
			Endpoints: []monitoringv1.Endpoint{{
				Port: "https",
				// The per-instance series carry the Memcached's namespace;
				// without honorLabels Prometheus would rename it to
				// exported_namespace in favour of the manager's.
				HonorLabels:     true,
				Path:            "/metrics",
				Scheme:          &https,
				BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
				HTTPConfigWithProxyAndTLSFiles: monitoringv1.HTTPConfigWithProxyAndTLSFiles{
					HTTPConfigWithTLSFiles: monitoringv1.HTTPConfigWithTLSFiles{
						TLSConfig: &monitoringv1.TLSConfig{SafeTLSConfig: monitoringv1.SafeTLSConfig{InsecureSkipVerify: ptr.To(true)}},
					},
				},
			}},
		},
	}
}

// The memcached pods, as the operator labels them.
const (
	memcachedApp     = "memcached"
	operatorName     = "memcached-operator"
	exporterPortName = "metrics"
)

// MemcachedPodMonitor scrapes the memcached_exporter sidecar of every
// Memcached that enables it, in every namespace: one object, shipped with
// the operator, rather than one created by the operator per Memcached.
// The operator then needs no watch on monitoring.coreos.com and no RBAC
// for it, and works the same whether or not prometheus-operator is
// installed; pods without the exporter have no "metrics" port and are
// not scraped. Each series gets the Memcached's name as `memcached`.
func MemcachedPodMonitor() *monitoringv1.PodMonitor {
	return &monitoringv1.PodMonitor{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PodMonitorsKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "memcached-operator-memcached-exporters",
			Namespace: "memcached-operator-system",
		},
		Spec: monitoringv1.PodMonitorSpec{
			NamespaceSelector: monitoringv1.NamespaceSelector{Any: true},
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name":       memcachedApp,
				"app.kubernetes.io/managed-by": operatorName,
			}},
			PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{{
				Port: ptr.To(exporterPortName),
				Path: "/metrics",
				RelabelConfigs: []monitoringv1.RelabelConfig{{
					SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_label_app_kubernetes_io_instance"},
					TargetLabel:  "memcached",
					Action:       "replace",
				}},
			}},
		},
	}
}
