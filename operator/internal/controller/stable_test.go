//go:build !unit

package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

func statefulSetOf(mc *cachev1alpha1.Memcached) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name}}
}

// markStatefulSetReady plays the StatefulSet controller, which envtest
// does not run: every wanted pod is updated, ready and available.
func markStatefulSetReady(t *testing.T, mc *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		s := fetch(g, statefulSetOf(mc))
		n := *s.Spec.Replicas
		s.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: s.Generation,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n, CurrentReplicas: n,
			CurrentRevision: "r1", UpdateRevision: "r1",
		}
		g.Expect(k8sClient.Status().Update(testCtx, s)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// identity: Stable runs the pods as a StatefulSet behind the headless
// Service, reports Ready from its status, lists the pods by their stable
// names, and cannot change back.
func TestStableIdentityRunsAStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "stable", 2, func(m *cachev1alpha1.Memcached) { m.Spec.Identity = cachev1alpha1.IdentityStable })
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())

	var sts *appsv1.StatefulSet
	g.Eventually(func(g Gomega) { sts = fetch(g, statefulSetOf(mc)) }, timeout, interval).Should(Succeed())
	g.Expect(sts.Spec.ServiceName).To(Equal(mc.Name))
	g.Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	g.Expect(sts.Spec.MinReadySeconds).To(Equal(cachev1alpha1.DefaultMinReadySeconds))
	g.Expect(metav1.IsControlledBy(sts, fetch(g, mc))).To(BeTrue())
	err := k8sClient.Get(testCtx, key(mc), &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a Stable Memcached has no Deployment: %v", err)
	g.Expect(fetch(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}).Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))

	markStatefulSetReady(t, mc)
	expectReady(t, mc)

	// The StatefulSet's pods, by their stable names; a third not ready.
	for i, name := range []string{"stable-1", "stable-0", "stable-2"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: resources.Labels(mc)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
		}
		g.Expect(k8sClient.Create(testCtx, pod)).To(Succeed())
		g.Eventually(func(g Gomega) {
			cur := fetch(g, pod)
			cur.Status = readyPod(name, "10.2.0."+string(rune('1'+i)), i < 2).Status
			g.Expect(k8sClient.Status().Update(testCtx, cur)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}
	g.Eventually(func(g Gomega) []string { return fetch(g, mc).Status.ServerList }, timeout, interval).Should(Equal([]string{
		"stable-0.stable." + ns + ".svc:11211", "stable-1.stable." + ns + ".svc:11211",
	}))

	// The identity is fixed at creation.
	cur := fetch(g, mc)
	cur.Spec.Identity = cachev1alpha1.IdentityEphemeral
	err = k8sClient.Update(testCtx, cur)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.identity cannot change"))

	// A scale is a StatefulSet scale, reported as one.
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) int32 { return *fetch(g, statefulSetOf(mc)).Spec.Replicas }, timeout, interval).Should(Equal(int32(3)))
	g.Eventually(func(g Gomega) []string { return eventReasons(g, mc) }, timeout, interval).Should(ContainElement(EventScaled))
}

// An Ephemeral Memcached cannot become Stable: the rule reads the
// default of a Memcached created before the field existed.
func TestEphemeralCannotBecomeStable(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "ephemeral", 1)
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	// The operator writes the new Memcached (finalizer, status) meanwhile:
	// an update that races it is a conflict, tried again on a fresh copy.
	var err error
	for range 20 {
		cur := fetch(g, mc)
		cur.Spec.Identity = cachev1alpha1.IdentityStable
		if err = k8sClient.Update(testCtx, cur); !apierrors.IsConflict(err) {
			break
		}
	}
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Create a new Memcached with the identity you want"))
}

// Warm restart gives each pod a claim for its memory file, memcached -e,
// and the reloader that saves the file when the pod stops.
func TestWarmRestartClaimsAMemoryFile(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "warm", 3, func(m *cachev1alpha1.Memcached) {
		m.Spec.Identity = cachev1alpha1.IdentityStable
		m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true, StorageClassName: ptr.To("memcached-ram")}}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	var sts *appsv1.StatefulSet
	g.Eventually(func(g Gomega) { sts = fetch(g, statefulSetOf(mc)) }, timeout, interval).Should(Succeed())
	g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
	claim := sts.Spec.VolumeClaimTemplates[0]
	g.Expect(claim.Name).To(Equal(resources.MemoryFileVolume))
	g.Expect(claim.Spec.StorageClassName).To(HaveValue(Equal("memcached-ram")))
	g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("65Mi"))
	g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(Equal(appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
	pod := sts.Spec.Template.Spec
	g.Expect(pod.ShareProcessNamespace).To(HaveValue(BeTrue()))
	names := []string{}
	for _, c := range pod.Containers {
		names = append(names, c.Name)
	}
	g.Expect(names).To(Equal([]string{"memcached", "reloader"}))
	g.Expect(strings.Join(pod.Containers[0].Args, " ")).To(ContainSubstring("-e " + resources.MemoryFile))
	g.Expect(slices.Contains(pod.Containers[1].Args, "--memory-file="+resources.MemoryFile)).To(BeTrue(), "reloader args %v", pod.Containers[1].Args)
	g.Expect(pod.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(cachev1alpha1.DefaultDrainSeconds + 5)))

	// The first change after the create hands the create's fields over to
	// the operator's apply (apply.go). The apply repeats the claim
	// template, which a StatefulSet cannot change: it must match the one
	// the apiserver defaulted at the create, or the apiserver refuses the
	// whole apply.
	g.Expect(managerEntries(sts)).To(ConsistOf(metav1.ManagedFieldsOperationUpdate))
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"pool": "cache"} })
	g.Eventually(func(g Gomega) {
		cur := fetch(g, statefulSetOf(mc))
		g.Expect(cur.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"pool": "cache"}))
		g.Expect(managerEntries(cur)).To(ConsistOf(metav1.ManagedFieldsOperationApply))
		g.Expect(cur.Spec.VolumeClaimTemplates).To(Equal(sts.Spec.VolumeClaimTemplates))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) []string { return eventReasons(g, mc) }, time.Second, interval).ShouldNot(ContainElement(EventApplyFailed))
}
