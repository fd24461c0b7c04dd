package resources

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

func stable(m *cachev1alpha1.Memcached) { m.Spec.Identity = cachev1alpha1.IdentityStable }

func warm(m *cachev1alpha1.Memcached) {
	m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true}}
}

func drain(seconds int32) func(*cachev1alpha1.Memcached) {
	return func(m *cachev1alpha1.Memcached) {
		m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{DrainSeconds: ptr.To(seconds), MinReadySeconds: ptr.To[int32](3)}
	}
}

// How a pod stops: the preStop sleep covers the drain (and the warm save),
// and the grace period covers the sleep, written only above the default.
func TestPodStopsAfterTheDrain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mutate    []func(*cachev1alpha1.Memcached)
		preStop   int64
		grace     *int64
		reloader  bool
		sharesPID bool
	}{
		{"the seed: a 5 s drain, the default grace", nil, 5, nil, false, false},
		{"a 30 s drain needs 40 s of grace", []func(*cachev1alpha1.Memcached){drain(30)}, 30, ptr.To[int64](40), false, false},
		{"no drain", []func(*cachev1alpha1.Memcached){drain(0)}, 0, nil, false, false},
		{"warm restart: the save after the drain, by the reloader", []func(*cachev1alpha1.Memcached){stable, warm}, 10, nil, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := seed(tt.mutate...)
			pod := podTemplate(m, testOptions).Spec
			g.Expect(*pod.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(tt.preStop))
			g.Expect(pod.TerminationGracePeriodSeconds).To(Equal(tt.grace))
			hasReloader := slices.ContainsFunc(pod.Containers, func(c corev1ac.ContainerApplyConfiguration) bool { return *c.Name == reloaderContainer })
			g.Expect(hasReloader).To(Equal(tt.reloader))
			g.Expect(ptr.Deref(pod.ShareProcessNamespace, false)).To(Equal(tt.sharesPID))
		})
	}
}

func TestStatefulSet(t *testing.T) {
	g := NewWithT(t)
	s := StatefulSet(seed(stable, drain(5)), testOptions)
	g.Expect(*s.Name).To(Equal("memcached-sample"))
	g.Expect(*s.Spec.ServiceName).To(Equal("memcached-sample"), "the headless Service gives the pods their DNS names")
	g.Expect(*s.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	g.Expect(*s.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
	g.Expect(*s.Spec.MinReadySeconds).To(Equal(int32(3)))
	g.Expect(*s.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(s.Spec.VolumeClaimTemplates).To(BeEmpty())
	g.Expect(s.Annotations).To(HaveKey(DesiredHashAnnotation))
	g.Expect(s.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("-e"))

	w := StatefulSet(seed(stable, warm), testOptions)
	g.Expect(w.Spec.VolumeClaimTemplates).To(HaveLen(1))
	claim := w.Spec.VolumeClaimTemplates[0]
	g.Expect(*claim.Name).To(Equal(MemoryFileVolume))
	g.Expect(claim.Spec.StorageClassName).To(BeNil(), "unset: the cluster's default class")
	size := claim.Spec.Resources.Requests.Storage()
	g.Expect(size.String()).To(Equal("65Mi"), "the file is -m (64 MiB) and its metadata")
	g.Expect(w.Spec.Template.Spec.Containers[0].Args).To(ContainElements("-e", MemoryFile))
	g.Expect(*w.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath).To(Equal(MemoryFileMountPath))
	g.Expect(*w.Spec.Template.Spec.SecurityContext.FSGroup).To(Equal(int64(cachev1alpha1.MemcachedUID)), "memcached writes the claim")
	g.Expect(ReloaderArgs(seed(stable, warm))).To(ContainElements("--memory-file="+MemoryFile, "--drain=5s"))
	g.Expect(*w.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(Equal(appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
}

func TestDeploymentWaitsMinReadySeconds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(*Deployment(seed(), testOptions).Spec.MinReadySeconds).To(Equal(cachev1alpha1.DefaultMinReadySeconds))
	g.Expect(*Deployment(seed(drain(1)), testOptions).Spec.MinReadySeconds).To(Equal(int32(3)))
}

func TestStableServer(t *testing.T) {
	NewWithT(t).Expect(StableServer(seed(stable), "memcached-sample-2")).To(Equal("memcached-sample-2.memcached-sample.ns.svc:11211"))
}
