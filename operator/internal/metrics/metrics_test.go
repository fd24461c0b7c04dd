package metrics

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

func memcached(ns, name string, size int32, generation int64, ready int32, conditions map[string]metav1.ConditionStatus) *cachev1alpha1.Memcached {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: generation}}
	mc.Spec.Size = &size
	mc.Status.ReadyReplicas = ready
	for t, s := range conditions {
		mc.Status.Conditions = append(mc.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "Test", ObservedGeneration: generation})
	}
	return mc
}

// The per-instance gauges: one series per Memcached and condition, the
// per-namespace counts, and a condition of an older generation counted
// as Unknown.
func TestInstanceCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ready := map[string]metav1.ConditionStatus{"Ready": "True", "Available": "True", "Progressing": "False", "Degraded": "False", "Stalled": "False"}
	stale := memcached("b", "stale", 1, 2, 0, map[string]metav1.ConditionStatus{"Ready": "True"})
	stale.Status.Conditions[0].ObservedGeneration = 1
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		memcached("a", "one", 3, 1, 3, ready),
		memcached("a", "two", 2, 1, 2, ready),
		stale,
	).Build()

	want := `
# HELP memcached_operator_instance_desired_replicas The Memcached's spec.size.
# TYPE memcached_operator_instance_desired_replicas gauge
memcached_operator_instance_desired_replicas{name="one",namespace="a"} 3
memcached_operator_instance_desired_replicas{name="stale",namespace="b"} 1
memcached_operator_instance_desired_replicas{name="two",namespace="a"} 2
# HELP memcached_operator_instance_ready_replicas The Memcached's status.readyReplicas, from its Deployment.
# TYPE memcached_operator_instance_ready_replicas gauge
memcached_operator_instance_ready_replicas{name="one",namespace="a"} 3
memcached_operator_instance_ready_replicas{name="stale",namespace="b"} 0
memcached_operator_instance_ready_replicas{name="two",namespace="a"} 2
`
	if err := testutil.CollectAndCompare(NewInstanceCollector(c), strings.NewReader(want),
		"memcached_operator_instance_desired_replicas", "memcached_operator_instance_ready_replicas"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(NewInstanceCollector(c), "memcached_operator_instance_condition"); n != 3*5 {
		t.Errorf("%d condition series, want 5 per Memcached", n)
	}
	instances := `
# HELP memcached_operator_instances Memcacheds by namespace and by the status of each condition (Ready, Available, Progressing, Degraded, Stalled).
# TYPE memcached_operator_instances gauge
memcached_operator_instances{condition="Available",namespace="a",status="True"} 2
memcached_operator_instances{condition="Available",namespace="b",status="Unknown"} 1
memcached_operator_instances{condition="Degraded",namespace="a",status="False"} 2
memcached_operator_instances{condition="Degraded",namespace="b",status="Unknown"} 1
memcached_operator_instances{condition="Progressing",namespace="a",status="False"} 2
memcached_operator_instances{condition="Progressing",namespace="b",status="Unknown"} 1
memcached_operator_instances{condition="Ready",namespace="a",status="True"} 2
memcached_operator_instances{condition="Ready",namespace="b",status="Unknown"} 1
memcached_operator_instances{condition="Stalled",namespace="a",status="False"} 2
memcached_operator_instances{condition="Stalled",namespace="b",status="Unknown"} 1
`
	if err := testutil.CollectAndCompare(NewInstanceCollector(c), strings.NewReader(instances), "memcached_operator_instances"); err != nil {
		t.Error(err)
	}
}

// Error reasons come from a fixed set, whatever the error says.
func TestErrorReason(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	exists := errors.New("exists")
	for _, c := range []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(gr, "x", errors.New("no")), "Forbidden"},
		{fmt.Errorf("apply Deployment x: %w", apierrors.NewConflict(gr, "x", errors.New("changed"))), "Conflict"},
		{errors.Join(errors.New("first"), apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "x", nil)), "Invalid"},
		{fmt.Errorf("wrapped: %w", exists), ReasonResourceExists},
		{errors.New("something else"), "Other"},
	} {
		if got := ErrorReason(c.err, func(err error) bool { return errors.Is(err, exists) }); got != c.want {
			t.Errorf("ErrorReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
