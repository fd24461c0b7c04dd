package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Invalid specs never reach the operator: the CRD's OpenAPI bounds and CEL
// rules make the apiserver reject them with a message that names the field.
func TestInvalidSpecsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	cfg := func(c cachev1alpha1.MemcachedConfig) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) { m.Spec.Memcached = &c }
	}
	ha := func(h cachev1alpha1.HighAvailabilitySpec) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) { m.Spec.HighAvailability = &h }
	}
	pdb := func(p cachev1alpha1.PodDisruptionBudgetSpec) func(*cachev1alpha1.Memcached) {
		return ha(cachev1alpha1.HighAvailabilitySpec{PodDisruptionBudget: &p})
	}
	quantity := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

	tests := []struct {
		name    string
		size    int32
		mutate  func(*cachev1alpha1.Memcached)
		message []string
	}{
		{"negative size", -1, nil, []string{"spec.size", "greater than or equal to 0"}},
		{"size above 64", 65, nil, []string{"spec.size", "less than or equal to 64"}},
		{"image with spaces", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Image = "memcached 1.6" }, []string{"spec.image", "must be an image reference"}},
		{"image with an upper-case path", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Image = "example.com/Cache/memcached:1" }, []string{"spec.image"}},
		{"too little memory", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](4)}), []string{"spec.memcached.maxMemoryMB", "greater than or equal to 8"}},
		{"zero connections", 1, cfg(cachev1alpha1.MemcachedConfig{MaxConnections: ptr.To[int32](0)}), []string{"spec.memcached.maxConnections"}},
		{"zero threads", 1, cfg(cachev1alpha1.MemcachedConfig{Threads: ptr.To[int32](0)}), []string{"spec.memcached.threads"}},
		{"verbosity 3", 1, cfg(cachev1alpha1.MemcachedConfig{Verbosity: 3}), []string{"spec.memcached.verbosity", "less than or equal to 2"}},
		{"item size 1m means a milli-byte", 1, cfg(cachev1alpha1.MemcachedConfig{MaxItemSize: quantity("1m")}), []string{"spec.memcached.maxItemSize", "whole number of bytes", "1Mi"}},
		{"item size above 1Gi", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](8192), MaxItemSize: quantity("2Gi")}), []string{"spec.memcached.maxItemSize", "between 1Ki and 1Gi"}},
		{"item size above half the memory", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](64), MaxItemSize: quantity("33Mi")}), []string{"spec.memcached.maxItemSize", "at most half of spec.memcached.maxMemoryMB"}},
		{"extra args set the memory", 1, cfg(cachev1alpha1.MemcachedConfig{ExtraArgs: []string{"-m", "1024"}}), []string{"spec.memcached.extraArgs", "must not set flags the operator manages"}},
		{"extra args set the port (long form)", 1, cfg(cachev1alpha1.MemcachedConfig{ExtraArgs: []string{"--port=1"}}), []string{"spec.memcached.extraArgs"}},
		{"unknown anti-affinity", 1, ha(cachev1alpha1.HighAvailabilitySpec{AntiAffinity: "Maybe"}), []string{"spec.highAvailability.antiAffinity", "Unsupported value", "Soft"}},
		{"budget with both bounds", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}), []string{"spec.highAvailability.podDisruptionBudget", "either minAvailable or maxUnavailable"}},
		{"budget allowing no disruption", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0))}), []string{"spec.highAvailability.podDisruptionBudget.maxUnavailable", "positive integer"}},
		{"budget with a word for a percentage", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("half"))}), []string{"spec.highAvailability.podDisruptionBudget.minAvailable", "percentage"}},
		{"memory limit below memcached's memory", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
		}, []string{"spec.resources.limits", "at least spec.memcached.maxMemoryMB"}},
		{"exporter image with spaces", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true, Image: "exporter latest"}}
		}, []string{"spec.monitoring.exporter.image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := newMemcached(ns, "invalid", tt.size)
			if tt.mutate != nil {
				tt.mutate(mc)
			}
			err := k8sClient.Create(testCtx, mc)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, want := range tt.message {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}

	// kubectl validates strictly: a misspelled field is an error, not a silent no-op.
	t.Run("unknown field", func(t *testing.T) {
		g := NewWithT(t)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
			"metadata": map[string]any{"name": "typo", "namespace": ns},
			"spec":     map[string]any{"sise": int64(3)},
		}}
		err := k8sClient.Create(testCtx, u, client.FieldValidation("Strict"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`unknown field "spec.sise"`))
	})
}

// A Memcached with only the fields the tutorial sets is valid and defaulted.
func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "defaults", 2, func(m *cachev1alpha1.Memcached) {
		m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{}
		m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	cur := fetch(g, mc)
	g.Expect(cur.Spec.Memcached.MaxMemoryMB).To(HaveValue(Equal(int32(64))))
	g.Expect(cur.Spec.Memcached.MaxConnections).To(HaveValue(Equal(int32(1024))))
	g.Expect(cur.Spec.Memcached.Threads).To(HaveValue(Equal(int32(4))))
	g.Expect(cur.Spec.HighAvailability.AntiAffinity).To(Equal(cachev1alpha1.AntiAffinitySoft))

	noSize := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "no-size", "namespace": ns},
		"spec":     map[string]any{},
	}}
	g.Expect(k8sClient.Create(testCtx, noSize)).To(Succeed())
	size, _, _ := unstructured.NestedInt64(noSize.Object, "spec", "size")
	g.Expect(size).To(Equal(int64(1)))
}
