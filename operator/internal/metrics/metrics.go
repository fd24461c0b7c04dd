// Package metrics is the operator's own Prometheus metrics, served on the
// manager's metrics endpoint beside controller-runtime's (reconcile
// counts, errors, durations, work queues) from the same registry.
//
// Cardinality is bounded by construction: counters carry only labels from
// fixed sets (an owned object's kind, a write's reason, a Kubernetes
// StatusReason), and the per-instance gauges are read from the informer
// cache at scrape time, so they hold exactly one series per existing
// Memcached (and condition) and nothing for deleted ones, as
// kube-state-metrics does.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// The reasons of OwnedWrites.
const (
	WriteCreated = "created"
	WriteUpdated = "updated"
	WriteDeleted = "deleted"
)

var (
	// OwnedWrites counts the writes to owned objects (Deployment, Service,
	// PodDisruptionBudget) that changed something, by kind and reason.
	OwnedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_owned_writes_total",
		Help: "Writes to objects the operator owns that changed them, by kind and reason (created, updated, deleted).",
	}, []string{"kind", "reason"})

	// DriftHeals counts the writes that undid a change made by someone
	// else: the Memcached's spec had already been reconciled, yet an owned
	// object differed from it or was missing.
	DriftHeals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_drift_heals_total",
		Help: "Owned objects restored after a change by someone else (edited or deleted), by kind.",
	}, []string{"kind"})

	// ReconcileErrors counts failed reconciles by the Kubernetes reason of
	// the error (Forbidden, Invalid, Conflict, ...), ResourceExists for a
	// same-named object the operator does not own, Other otherwise.
	ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_reconcile_errors_total",
		Help: "Failed reconciles, by reason: the apiserver's StatusReason, ResourceExists, or Other.",
	}, []string{"reason"})

	info = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_info",
		Help: "Always 1; the labels describe the running operator.",
	}, []string{"version"})
)

// ReasonResourceExists is ReconcileErrors' reason for an object of the
// operator's name that it does not control.
const ReasonResourceExists = "ResourceExists"

// ErrorReason is the ReconcileErrors label of err: one of a fixed set.
func ErrorReason(err error, resourceExists func(error) bool) string {
	if resourceExists != nil && resourceExists(err) {
		return ReasonResourceExists
	}
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		return string(status.Status().Reason)
	}
	return "Other"
}

// Register adds the metrics to controller-runtime's registry, with the
// per-instance gauges read from reader (the manager's cache).
func Register(version string, reader client.Reader) {
	info.WithLabelValues(version).Set(1)
	ctrlmetrics.Registry.MustRegister(OwnedWrites, DriftHeals, ReconcileErrors, info, NewInstanceCollector(reader))
}

var (
	instancesDesc = prometheus.NewDesc("memcached_operator_instances",
		"Memcacheds by namespace and by the status of each condition (Ready, Available, Progressing, Degraded, Stalled).",
		[]string{"namespace", "condition", "status"}, nil)
	conditionDesc = prometheus.NewDesc("memcached_operator_instance_condition",
		"1 when the Memcached's condition is True, 0 when False or Unknown; one series per Memcached and condition.",
		[]string{"namespace", "name", "condition"}, nil)
	desiredDesc = prometheus.NewDesc("memcached_operator_instance_desired_replicas",
		"The Memcached's spec.size.", []string{"namespace", "name"}, nil)
	readyDesc = prometheus.NewDesc("memcached_operator_instance_ready_replicas",
		"The Memcached's status.readyReplicas, from its Deployment.", []string{"namespace", "name"}, nil)
	instanceConditions = []string{
		cachev1alpha1.ConditionReady, cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionProgressing,
		cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionStalled,
	}
)

// InstanceCollector reports the Memcacheds as the cache holds them.
type InstanceCollector struct{ reader client.Reader }

// NewInstanceCollector reads Memcacheds from reader at every scrape.
func NewInstanceCollector(reader client.Reader) *InstanceCollector {
	return &InstanceCollector{reader: reader}
}

// Describe implements prometheus.Collector.
func (c *InstanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{instancesDesc, conditionDesc, desiredDesc, readyDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *InstanceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := &cachev1alpha1.MemcachedList{}
	// Read only, so the cache's own objects will do: a deep copy of every
	// Memcached at every scrape was most of what a scrape allocated (some
	// 35 MiB at N=10,000, docs/performance.md).
	if err := c.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(instancesDesc, err)
		return
	}
	type key struct{ namespace, condition, status string }
	counts := map[key]float64{}
	for i := range list.Items {
		mc := &list.Items[i]
		ch <- prometheus.MustNewConstMetric(desiredDesc, prometheus.GaugeValue, float64(mc.GetSize()), mc.Namespace, mc.Name)
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(mc.Status.ReadyReplicas), mc.Namespace, mc.Name)
		for _, condType := range instanceConditions {
			status := metav1.ConditionUnknown
			if cond := meta.FindStatusCondition(mc.Status.Conditions, condType); cond != nil && cond.ObservedGeneration == mc.Generation {
				status = cond.Status
			}
			value := 0.0
			if status == metav1.ConditionTrue {
				value = 1
			}
			ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, value, mc.Namespace, mc.Name, condType)
			counts[key{mc.Namespace, condType, string(status)}]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, n, k.namespace, k.condition, k.status)
	}
}
