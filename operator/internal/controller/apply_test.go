package controller

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

func TestSubset(t *testing.T) {
	tests := []struct {
		name       string
		want, have string
		subset     bool
	}{
		{"equal", `{"a":1}`, `{"a":1}`, true},
		{"extra fields in live are someone else's", `{"a":1}`, `{"a":1,"b":2}`, true},
		{"changed scalar", `{"a":1}`, `{"a":2}`, false},
		{"missing field", `{"a":1,"b":2}`, `{"a":1}`, false},
		{"nested maps", `{"spec":{"x":{"y":"z"}}}`, `{"spec":{"x":{"y":"z","w":1}}}`, true},
		{"list elements are compared as subsets", `{"c":[{"name":"m","image":"i"}]}`, `{"c":[{"name":"m","image":"i","imagePullPolicy":"IfNotPresent"}]}`, true},
		{"list length differs", `{"c":[{"name":"m"}]}`, `{"c":[{"name":"m"},{"name":"exporter"}]}`, false},
		{"list order differs", `{"c":["a","b"]}`, `{"c":["b","a"]}`, false},
		{"integer and float are not equal", `{"a":1}`, `{"a":1.5}`, false},
		{"type change", `{"a":"1"}`, `{"a":1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var w, h map[string]any
			g.Expect(json.Unmarshal([]byte(tt.want), &w)).To(Succeed())
			g.Expect(json.Unmarshal([]byte(tt.have), &h)).To(Succeed())
			g.Expect(subset(w, h)).To(Equal(tt.subset))
		})
	}
}

// Typed objects and their apply configurations compare equal through the
// unstructured converter, quantities and int-or-strings included.
func TestSubsetOfTypedAndApplyConfiguration(t *testing.T) {
	g := NewWithT(t)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "u"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}}
	desired := resources.Deployment(mc, resources.Options{MemcachedImage: "memcached:1"})
	live := &appsv1.Deployment{}
	raw, err := json.Marshal(desired)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(raw, live)).To(Succeed())
	// What the apiserver adds does not matter.
	live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	live.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	same := func() bool {
		w, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
		g.Expect(err).NotTo(HaveOccurred())
		h, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
		g.Expect(err).NotTo(HaveOccurred())
		return subset(w, h)
	}
	g.Expect(same()).To(BeTrue())

	live.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	g.Expect(same()).To(BeFalse())
}
