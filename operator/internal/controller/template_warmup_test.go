//go:build !unit

package controller

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/metrics"
)

// templatelessReads serves Deployments as the manager's cache does, through
// the cache's own transform, but fresh from the apiserver. It counts the
// Deployment applies.
type templatelessReads struct {
	client.Client
	applies *atomic.Int64
}

func (c templatelessReads) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*appsv1.Deployment); ok {
		c.applies.Add(1)
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c templatelessReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		if _, err := dropPodTemplate(d); err != nil {
			return err
		}
	}
	return nil
}

// deploymentReads counts the Deployments read from the apiserver.
type deploymentReads struct {
	client.Reader
	n     atomic.Int64 // Deployments read one by one
	pages atomic.Int64 // lists of Deployments
}

func (r *deploymentReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*appsv1.DeploymentList); ok {
		r.pages.Add(1)
	}
	return r.Reader.List(ctx, list, opts...)
}

func (r *deploymentReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appsv1.Deployment); ok {
		r.n.Add(1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// The cache holds Deployments without their pod templates. A reconcile reads
// the template from the apiserver only when its fingerprint is not the one
// the operator last verified: after a restart, and after someone changed it.
// A changed template is healed; a template that still holds everything the
// operator applies (a rollout restart's annotation) is left alone.
func TestPodTemplateIsReadOnlyWhenItChanged(t *testing.T) {
	g := NewWithT(t)
	mc := newMemcached(unmanagedNamespace, "templates", 2)
	createUnmanaged(t, mc)
	var applies atomic.Int64
	newReconciler := func() (*MemcachedReconciler, *deploymentReads) {
		// The manager's own reader: protobuf, as in production.
		reads := &deploymentReads{Reader: reconciler.APIReader}
		return &MemcachedReconciler{Client: podsFromCache{templatelessReads{Client: k8sClient, applies: &applies}}, APIReader: reads, Defaults: testDefaults}, reads
	}
	updates := func() float64 {
		return testutil.ToFloat64(metrics.OwnedWrites.WithLabelValues("Deployment", metrics.WriteUpdated))
	}
	// reconcile runs r once and returns the Deployments it read from the
	// apiserver and whether it applied the Deployment.
	reconcile := func(r *MemcachedReconciler, reads *deploymentReads) (int64, bool) {
		t.Helper()
		before, applied := reads.n.Load(), applies.Load()
		_, err := r.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
		return reads.n.Load() - before, applies.Load() != applied
	}

	first, _ := newReconciler()
	_, err := first.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
	g.Expect(err).NotTo(HaveOccurred())
	created := fetch(g, deploymentOf(mc))
	g.Expect(created.Spec.Template.Spec.Containers).NotTo(BeEmpty())

	r, reads := newReconciler() // a restarted manager: nothing verified
	n, written := reconcile(r, reads)
	g.Expect(n).To(Equal(int64(1)), "after a restart the template is read once")
	g.Expect(written).To(BeFalse(), "and found as it should be: no apply")
	n, _ = reconcile(r, reads)
	g.Expect(n).To(BeZero(), "then its fingerprint is enough")

	updated := updates()
	update(t, deploymentOf(mc), func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "memcached:evil" })
	n, written = reconcile(r, reads)
	g.Expect(n).To(Equal(int64(1)), "a changed template is read")
	g.Expect(written).To(BeTrue())
	g.Expect(fetch(g, deploymentOf(mc)).Spec.Template.Spec.Containers[0].Image).To(Equal(testDefaults.MemcachedImage), "healed")
	g.Expect(updates()).To(Equal(updated + 1))
	n, _ = reconcile(r, reads)
	g.Expect(n).To(BeZero(), "the heal's answer is verified")

	update(t, deploymentOf(mc), func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-12-03T15:00:00Z"
	})
	n, written = reconcile(r, reads)
	g.Expect(n).To(Equal(int64(1)))
	g.Expect(written).To(BeFalse(), "a rollout restart is not drift")
	n, _ = reconcile(r, reads)
	g.Expect(n).To(BeZero())

	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](4) })
	n, written = reconcile(r, reads)
	g.Expect(n).To(BeZero(), "a new spec is applied without reading the template")
	g.Expect(written).To(BeTrue())
	g.Expect(*fetch(g, deploymentOf(mc)).Spec.Replicas).To(Equal(int32(4)))
	n, written = reconcile(r, reads)
	g.Expect(n).To(BeZero())
	g.Expect(written).To(BeFalse())

	g.Expect(k8sClient.Delete(testCtx, fetch(g, mc))).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.templates().entries).To(BeEmpty(), "a deleted Memcached's record goes")
	}, timeout, interval).Should(Succeed())
}

// A new leader verifies the templates of the operator's Deployments with a
// paginated LIST before the resync's reconciles need them: those reconciles
// read no template, and one changed by hand is still read and healed.
func TestWarmUpVerifiesTemplatesAfterARestart(t *testing.T) {
	g := NewWithT(t)
	var applies atomic.Int64
	newReconciler := func() (*MemcachedReconciler, *deploymentReads) {
		reads := &deploymentReads{Reader: reconciler.APIReader}
		return &MemcachedReconciler{Client: podsFromCache{templatelessReads{Client: k8sClient, applies: &applies}}, APIReader: reads, Defaults: testDefaults}, reads
	}
	first, _ := newReconciler()
	intact, changed := newMemcached(unmanagedNamespace, "warm-intact", 2), newMemcached(unmanagedNamespace, "warm-changed", 2)
	for _, mc := range []*cachev1alpha1.Memcached{intact, changed} {
		createUnmanaged(t, mc)
		_, err := first.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	update(t, deploymentOf(changed), func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "memcached:evil" })

	r, reads := newReconciler() // restarted
	r.templates().warmingUp()
	g.Expect(templateWarmUp{r: r, namespaces: []string{unmanagedNamespace}, pageSize: 1}.Start(testCtx)).To(Succeed())
	g.Expect(reads.pages.Load()).To(BeNumerically(">=", 2), "one Deployment a page")

	reconcile := func(mc *cachev1alpha1.Memcached) (int64, bool) {
		t.Helper()
		before, applied := reads.n.Load(), applies.Load()
		_, err := r.Reconcile(testCtx, ctrl.Request{NamespacedName: key(mc)})
		g.Expect(err).NotTo(HaveOccurred())
		return reads.n.Load() - before, applies.Load() != applied
	}
	n, written := reconcile(intact)
	g.Expect(n).To(BeZero(), "verified by the warm-up: not read again")
	g.Expect(written).To(BeFalse())
	n, written = reconcile(changed)
	g.Expect(n).To(Equal(int64(1)), "a template the warm-up could not verify is read")
	g.Expect(written).To(BeTrue())
	g.Expect(fetch(g, deploymentOf(changed)).Spec.Template.Spec.Containers[0].Image).To(Equal(testDefaults.MemcachedImage), "healed")
}
