//go:build !unit

package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/operator/internal/metrics"
)

// ownedNotCached answers NotFound for the owned kinds, as an informer cache
// that has not yet seen the operator's own creates does.
type ownedNotCached struct{ client.Client }

func (c ownedNotCached) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget:
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// An object missing from the cache is created; when the POST finds it
// exists, its metadata is read, and when it is the operator's own it is read
// in full and compared like a cached one: nothing is written when nothing
// changed (no event, no counted write), and a hand edit is undone.
func TestObjectsMissingFromTheCacheAreReadAsMetadata(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx
	mc := newMemcached(unmanagedNamespace, "lagging", 2)
	createUnmanaged(t, mc)
	r := &MemcachedReconciler{Client: podsFromCache{ownedNotCached{k8sClient}}, APIReader: k8sClient, Defaults: testDefaults}
	reconcile := func() {
		t.Helper()
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	updates := func() float64 {
		return testutil.ToFloat64(metrics.OwnedWrites.WithLabelValues("Deployment", metrics.WriteUpdated))
	}

	reconcile() // creates
	created := fetch(g, deploymentOf(mc))
	before := updates()
	reconcile() // finds them in the apiserver only, with a failed POST each
	g.Expect(fetch(g, deploymentOf(mc)).ResourceVersion).To(Equal(created.ResourceVersion), "the apply changed nothing")
	g.Expect(updates()).To(Equal(before), "an apply that changes nothing is not an update")

	update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
	reconcile()
	g.Expect(*fetch(g, deploymentOf(mc)).Spec.Replicas).To(Equal(int32(2)), "healed")
	g.Expect(updates()).To(Equal(before+1), "the heal is an update")
}
