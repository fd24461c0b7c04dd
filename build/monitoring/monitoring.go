// Package monitoring defines the operator's prometheus-operator objects
// with prometheus-operator's own Go API, so that they are typed and
// checked by its compiler instead of written by hand; `make manifests`
// writes them into deploy/prometheus (generate prometheus).
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
				Port:            "https",
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
