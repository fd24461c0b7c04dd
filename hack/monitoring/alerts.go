package monitoring

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// RunbookURL is where each alert's runbook section lives (docs/runbooks.md).
const RunbookURL = "https://github.com/example/memcached-operator/blob/main/docs/runbooks.md"

// ManagerJob is the job label Prometheus gives the manager's targets: the
// name of the metrics Service the ServiceMonitor selects.
const ManagerJob = "memcached-operator-controller-manager-metrics-service"

// Alert is one alerting rule with its runbook anchor.
type Alert struct {
	Name, Expr, For, Severity, Summary, Description string
}

// Alerts are the rules of the PrometheusRule, in its two groups: the
// operator's view of each Memcached and of itself, and the caches' own
// metrics from the exporter. Thresholds are where a person should look,
// not where a cache is already broken.
var Alerts = map[string][]Alert{
	"memcached-operator": {
		{
			Name: "MemcachedNotReady", For: "10m", Severity: "warning",
			Expr:        `memcached_operator_instance_condition{condition="Ready"} == 0`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.name }} has not been Ready for 10 minutes.",
			Description: "Its Ready condition is False or Unknown: fewer pods are ready than spec.size, a rollout is in progress, or the operator cannot apply its objects.",
		},
		{
			Name: "MemcachedDegraded", For: "10m", Severity: "warning",
			Expr:        `memcached_operator_instance_condition{condition="Degraded"} == 1`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.name }} has been Degraded for 10 minutes.",
			Description: "The operator reports a failure it cannot fix by itself: a rejected apply (admission, quota, RBAC), a same-named object it does not own, or a rollout past its deadline. `kubectl describe memcached` shows the message.",
		},
		{
			Name: "MemcachedReplicasMismatch", For: "15m", Severity: "warning",
			Expr:        `memcached_operator_instance_ready_replicas != memcached_operator_instance_desired_replicas`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.name }} has had {{ $value }} ready pods, not spec.size, for 15 minutes.",
			Description: "Ready pods differ from spec.size for longer than a rollout takes: pods cannot be scheduled, pulled or started, or are not ready.",
		},
		{
			Name: "MemcachedOperatorDown", For: "5m", Severity: "critical",
			Expr:        `absent(up{job="` + ManagerJob + `"} == 1)`,
			Summary:     "The memcached operator has been down or missing from Prometheus for 5 minutes.",
			Description: "No manager target is up: the manager is not running, not ready, or Prometheus cannot scrape it (ServiceMonitor, network policy, metrics-reader binding). Memcacheds keep serving, but nothing reconciles them.",
		},
		{
			Name: "MemcachedOperatorReconcileErrors", For: "15m", Severity: "warning",
			Expr:        `sum(rate(memcached_operator_reconcile_errors_total[5m])) / sum(rate(controller_runtime_reconcile_total{controller="memcached"}[5m])) > 0.1`,
			Summary:     "More than 10% of the memcached operator's reconciles have failed for 15 minutes.",
			Description: "memcached_operator_reconcile_errors_total by reason says what the apiserver answers (Forbidden, Invalid, Conflict, ...).",
		},
	},
	"memcached": {
		{
			Name: "MemcachedEvictionsRising", For: "15m", Severity: "warning",
			Expr:        `sum by (namespace, memcached) (rate(memcached_items_evicted_total[10m])) > 1`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.memcached }} evicts {{ $value | humanize }} items/s.",
			Description: "Items are evicted before they expire: the cache is too small for its working set. Raise spec.maxMemoryMB or spec.size.",
		},
		{
			Name: "MemcachedHitRatioLow", For: "30m", Severity: "info",
			Expr: `(sum by (namespace, memcached) (rate(memcached_commands_total{command="get",status="hit"}[10m]))` +
				` / sum by (namespace, memcached) (rate(memcached_commands_total{command="get"}[10m]))) < 0.8` +
				` and sum by (namespace, memcached) (rate(memcached_commands_total{command="get"}[10m])) > 1`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.memcached }} answers only {{ $value | humanizePercentage }} of gets from cache.",
			Description: "Fewer than 80% of gets hit for 30 minutes (with at least 1 get/s): evictions, short TTLs, or clients reading keys nobody writes.",
		},
		{
			Name: "MemcachedConnectionsNearLimit", For: "10m", Severity: "warning",
			Expr:        `memcached_current_connections / memcached_max_connections > 0.9`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.memcached }} pod {{ $labels.pod }} uses {{ $value | humanizePercentage }} of its connections.",
			Description: "At spec.maxConnections memcached refuses new clients. Raise spec.maxConnections or spec.size, or pool client connections.",
		},
		{
			Name: "MemcachedMemoryNearLimit", For: "15m", Severity: "info",
			Expr:        `memcached_current_bytes / memcached_limit_bytes > 0.95`,
			Summary:     "Memcached {{ $labels.namespace }}/{{ $labels.memcached }} pod {{ $labels.pod }} holds {{ $value | humanizePercentage }} of its memory limit.",
			Description: "The cache is full: from here on every new item evicts an old one. Normal for a warm cache; act if MemcachedEvictionsRising fires too.",
		},
	},
}

// Groups is the order of the rule groups.
var Groups = []string{"memcached-operator", "memcached"}

// PrometheusRule holds Alerts.
func PrometheusRule() *monitoringv1.PrometheusRule {
	rule := &monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PrometheusRuleKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "memcached-operator-alerts",
			Namespace: "memcached-operator-system",
			// Set here, not by the component: a component's label
			// transformer would label everything its includer builds.
			Labels: map[string]string{"app.kubernetes.io/name": operatorName, "app.kubernetes.io/part-of": operatorName},
		},
	}
	for _, group := range Groups {
		g := monitoringv1.RuleGroup{Name: group}
		for _, a := range Alerts[group] {
			g.Rules = append(g.Rules, monitoringv1.Rule{
				Alert:  a.Name,
				Expr:   intstr.FromString(a.Expr),
				For:    ptr.To(monitoringv1.Duration(a.For)),
				Labels: map[string]string{"severity": a.Severity},
				Annotations: map[string]string{
					"summary":     a.Summary,
					"description": a.Description,
					"runbook_url": RunbookURL + "#" + anchor(a.Name),
				},
			})
		}
		rule.Spec.Groups = append(rule.Spec.Groups, g)
	}
	return rule
}

// anchor is GitHub's anchor of a Markdown heading made of the alert name.
func anchor(name string) string {
	out := make([]byte, 0, len(name))
	for _, c := range []byte(name) {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}
