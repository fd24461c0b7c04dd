package resources

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// fuzzMemcached turns fuzz input into a Memcached inside the CRD's
// documented bounds (names, sizes, memory, connections, threads, item
// size, verbosity, anti-affinity, budget, exporter), so that the builders
// are exercised on what the API accepts rather than on what it rejects.
func fuzzMemcached(name string, size, memoryMB, conns, threads, itemKi uint32, verbosity uint8, hard, pdb, exporter bool, minAvailable uint8) *cachev1alpha1.Memcached {
	name = strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, name), "-")
	// The CRD's rule: a DNS-1035 label, at most 63 characters.
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "m" + name
	}
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "uid-fuzz"},
		Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To(int32(size % 65)),
			Memcached: &cachev1alpha1.MemcachedConfig{
				MaxMemoryMB:    ptr.To(int32(8 + memoryMB%4096)),
				MaxConnections: ptr.To(int32(1 + conns%65536)),
				Threads:        ptr.To(int32(1 + threads%64)),
				Verbosity:      int32(verbosity % 3),
			},
		},
	}
	// Item sizes memcached accepts: a power of two from 1Ki to 1Mi, or a
	// multiple of the 512Ki slab chunk above it (see the API's validation).
	if itemKi%2 == 0 {
		mc.Spec.Memcached.MaxItemSize = resource.NewQuantity(int64(1024)<<(itemKi%11), resource.BinarySI)
	}
	if hard {
		mc.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityHard}
	}
	if pdb {
		if mc.Spec.HighAvailability == nil {
			mc.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{}
		}
		mc.Spec.HighAvailability.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{
			Enabled: ptr.To(true), MinAvailable: ptr.To(intstr.FromInt32(int32(minAvailable % 65))),
		}
	}
	if exporter {
		mc.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
	}
	return mc
}

// FuzzBuilders: for any Memcached the API accepts, the builders do not
// panic and their objects pass the validation apimachinery offers (names,
// labels, selectors) and the invariants the apiserver and the controllers
// rely on: the Deployment's selector selects its own pods, the Service and
// the budget select exactly those pods, container and port names are DNS
// labels, memory requests fit the limits, replicas equal spec.size.
// `go test` runs the seeds; `go test -fuzz=FuzzBuilders` explores.
func FuzzBuilders(f *testing.F) {
	f.Add("memcached-sample", uint32(3), uint32(64), uint32(1024), uint32(4), uint32(0), uint8(0), false, false, false, uint8(0))
	f.Add("app-cache", uint32(3), uint32(256), uint32(4096), uint32(8), uint32(10), uint8(2), true, true, true, uint8(2))
	f.Add("Zero_Size!", uint32(0), uint32(0), uint32(0), uint32(0), uint32(1), uint8(1), false, true, false, uint8(64))
	f.Add(strings.Repeat("long-name-", 8), uint32(64), uint32(4095), uint32(65535), uint32(63), uint32(20), uint8(1), true, true, true, uint8(200))
	f.Fuzz(func(t *testing.T, name string, size, memoryMB, conns, threads, itemKi uint32, verbosity uint8, hard, pdb, exporter bool, minAvailable uint8) {
		mc := fuzzMemcached(name, size, memoryMB, conns, threads, itemKi, verbosity, hard, pdb, exporter, minAvailable)
		var errs field.ErrorList
		fail := func(format string, args ...any) {
			errs = append(errs, field.InternalError(nil, fmt.Errorf(format, args...)))
		}

		d := Deployment(mc, testOptions)
		if d == nil || d.Spec == nil || d.Spec.Template == nil || d.Spec.Template.Spec == nil {
			t.Fatalf("no Deployment for %+v", mc.Spec)
		}
		for _, msg := range validation.IsDNS1123Subdomain(*d.Name) {
			fail("Deployment name %q: %s", *d.Name, msg)
		}
		errs = append(errs, metav1validation.ValidateLabels(d.Labels, field.NewPath("metadata", "labels"))...)
		errs = append(errs, metav1validation.ValidateLabels(d.Spec.Template.Labels, field.NewPath("spec", "template", "metadata", "labels"))...)
		selector := metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels}
		errs = append(errs, metav1validation.ValidateLabelSelector(&selector, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "selector"))...)
		podLabels := labels.Set(d.Spec.Template.Labels)
		if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
			fail("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, podLabels)
		}
		if got := ptr.Deref(d.Spec.Replicas, -1); got != mc.GetSize() {
			fail("replicas %d, spec.size %d", got, mc.GetSize())
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, msg := range validation.IsDNS1123Label(*c.Name) {
				fail("container name %q: %s", *c.Name, msg)
			}
			for _, p := range c.Ports {
				for _, msg := range validation.IsValidPortName(*p.Name) {
					fail("port name %q: %s", *p.Name, msg)
				}
				for _, msg := range validation.IsValidPortNum(int(*p.ContainerPort)) {
					fail("port %d: %s", *p.ContainerPort, msg)
				}
			}
			if c.Resources != nil && c.Resources.Requests != nil && c.Resources.Limits != nil {
				for _, r := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU} {
					req, hasReq := (*c.Resources.Requests)[r]
					lim, hasLim := (*c.Resources.Limits)[r]
					if hasReq && hasLim && req.Cmp(lim) > 0 {
						fail("container %s: %s request %s above its limit %s", *c.Name, r, req.String(), lim.String())
					}
				}
			}
		}

		s := Service(mc)
		for _, msg := range validation.IsDNS1035Label(*s.Name) {
			fail("Service name %q: %s", *s.Name, msg)
		}
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			fail("the Service's selector %v does not select the pods %v", s.Spec.Selector, podLabels)
		}
		if budget := PodDisruptionBudget(mc); budget != nil {
			sel := metav1.LabelSelector{MatchLabels: budget.Spec.Selector.MatchLabels}
			errs = append(errs, metav1validation.ValidateLabelSelector(&sel, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "selector"))...)
			if !labels.SelectorFromSet(budget.Spec.Selector.MatchLabels).Matches(podLabels) {
				fail("the budget's selector %v does not select the pods %v", budget.Spec.Selector.MatchLabels, podLabels)
			}
		}
		if len(errs) > 0 {
			t.Fatalf("Memcached %s %+v:\n%v", mc.Name, mc.Spec, errs.ToAggregate())
		}
	})
}
