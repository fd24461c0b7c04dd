package resources

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

var testOptions = Options{MemcachedImage: "memcached:default", ExporterImage: "exporter:default"}

// seed is the tutorial's CR: only size is set.
func seed(mutate ...func(*cachev1alpha1.Memcached)) *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: "ns", UID: "uid-1"},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func container(d *appsv1ac.DeploymentApplyConfiguration, name string) (int, bool) {
	for i, c := range d.Spec.Template.Spec.Containers {
		if *c.Name == name {
			return i, true
		}
	}
	return -1, false
}

func TestDeploymentFromSeed(t *testing.T) {
	g := NewWithT(t)
	d := Deployment(seed(), testOptions)

	g.Expect(*d.Name).To(Equal("memcached-sample"))
	g.Expect(*d.Namespace).To(Equal("ns"))
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
		LabelName: "memcached", LabelInstance: "memcached-sample",
	}))
	g.Expect(d.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))
	g.Expect(d.Spec.Template.Labels).To(Equal(d.Labels))
	g.Expect(d.Annotations).To(HaveKey(DesiredHashAnnotation))

	g.Expect(d.OwnerReferences).To(HaveLen(1))
	owner := d.OwnerReferences[0]
	g.Expect(*owner.Kind).To(Equal("Memcached"))
	g.Expect(*owner.APIVersion).To(Equal("cache.example.com/v1alpha1"))
	g.Expect(string(*owner.UID)).To(Equal("uid-1"))
	g.Expect(*owner.Controller).To(BeTrue())

	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(*c.Image).To(Equal("memcached:default"))
	g.Expect(c.Args).To(Equal([]string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4"}))
	g.Expect(*c.Ports[0].ContainerPort).To(Equal(int32(11211)))
	g.Expect(*c.ReadinessProbe.TCPSocket.Port).To(Equal(intstr.FromString("memcached")))
	g.Expect(*c.LivenessProbe.TCPSocket.Port).To(Equal(intstr.FromString("memcached")))
	// MinimumMemoryMiB(64, 1024): 64 + 16 + 8 + 16.
	g.Expect((*c.Resources.Requests)[corev1.ResourceMemory]).To(Equal(resource.MustParse("104Mi")))
	g.Expect((*c.Resources.Limits)[corev1.ResourceMemory]).To(Equal(resource.MustParse("104Mi")))

	// Pod Security "restricted".
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))

	g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(ConfigHashAnnotation, ConfigHash(c.Args)))
	g.Expect(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	g.Expect(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
	g.Expect(*pod.SecurityContext.RunAsUser).To(Equal(int64(11211)))
	g.Expect(*pod.SecurityContext.RunAsGroup).To(Equal(int64(11211)))
	g.Expect(pod.ServiceAccountName).To(BeNil(), "the namespace's default ServiceAccount")
	g.Expect(c.ImagePullPolicy).To(BeNil(), "left to Kubernetes' defaulting, or every comparison with the live object would differ")
	g.Expect(*d.Spec.RevisionHistoryLimit).To(Equal(int32(10)))
	// Replace pods in place, one at a time: no surge pod that hard
	// anti-affinity could leave unschedulable.
	g.Expect(*d.Spec.Strategy.Type).To(Equal(appsv1.RollingUpdateDeploymentStrategyType))
	g.Expect(*d.Spec.Strategy.RollingUpdate.MaxSurge).To(Equal(intstr.FromInt32(0)))
	g.Expect(*d.Spec.Strategy.RollingUpdate.MaxUnavailable).To(Equal(intstr.FromInt32(1)))
}

// The rollout takes down as many pods at once as the budget lets be
// disrupted, never fewer than one and never a surge pod.
func TestRolloutStrategyFollowsTheBudget(t *testing.T) {
	budget := func(size int32, p *cachev1alpha1.PodDisruptionBudgetSpec) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) {
			m.Spec.Size = ptr.To(size)
			m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityHard, PodDisruptionBudget: p}
		}
	}
	tests := []struct {
		name   string
		mutate func(*cachev1alpha1.Memcached)
		want   int32
	}{
		{"one pod", budget(1, nil), 1},
		{"default budget", budget(5, nil), 1},
		{"maxUnavailable 2", budget(5, &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}), 2},
		{"maxUnavailable 50% rounds up as the budget does", budget(5, &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))}), 3},
		{"minAvailable 3 of 5", budget(5, &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3))}), 2},
		{"minAvailable equal to size still lets one pod go", budget(3, &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3))}), 1},
		{"minAvailable 50% of 3 is 2", budget(3, &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}), 1},
		{"budget disabled", budget(6, &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false), MaxUnavailable: ptr.To(intstr.FromInt32(3))}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := Deployment(seed(tt.mutate), testOptions).Spec.Strategy
			g.Expect(*s.RollingUpdate.MaxSurge).To(Equal(intstr.FromInt32(0)))
			g.Expect(*s.RollingUpdate.MaxUnavailable).To(Equal(intstr.FromInt32(tt.want)))
		})
	}
}

// The operator-sdk getting-started sample selects pods by a fixed label, so
// two Memcacheds in one namespace adopt each other's pods. Ours must not.
func TestSelectorsArePerInstance(t *testing.T) {
	g := NewWithT(t)
	a := Deployment(seed(func(m *cachev1alpha1.Memcached) { m.Name = "a" }), testOptions)
	b := Deployment(seed(func(m *cachev1alpha1.Memcached) { m.Name = "b" }), testOptions)
	g.Expect(a.Spec.Selector.MatchLabels).NotTo(Equal(b.Spec.Selector.MatchLabels))
	g.Expect(Service(seed(func(m *cachev1alpha1.Memcached) { m.Name = "a" })).Spec.Selector).To(Equal(a.Spec.Selector.MatchLabels))
	g.Expect(Selector(seed())).To(Equal("app.kubernetes.io/instance=memcached-sample,app.kubernetes.io/name=memcached"))
}

func TestDeploymentSpecFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*cachev1alpha1.Memcached)
		check  func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration)
	}{
		{
			name:   "size unset defaults to one pod",
			mutate: func(m *cachev1alpha1.Memcached) { m.Spec.Size = nil },
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
			},
		},
		{
			name:   "size zero scales to zero",
			mutate: func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](0) },
			check:  func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) { g.Expect(*d.Spec.Replicas).To(BeZero()) },
		},
		{
			name:   "spec.image overrides the operator default",
			mutate: func(m *cachev1alpha1.Memcached) { m.Spec.Image = "registry.example.com/memcached:1.6.39" },
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(*d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example.com/memcached:1.6.39"))
			},
		},
		{
			name: "memcached settings become flags",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{
					MaxMemoryMB:    ptr.To[int32](256),
					MaxConnections: ptr.To[int32](4096),
					Threads:        ptr.To[int32](8),
					MaxItemSize:    ptr.To(resource.MustParse("2Mi")),
					Verbosity:      2,
					ExtraArgs:      []string{"-o", "modern"},
				}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{
					"-p", "11211", "-m", "256", "-c", "4096", "-t", "8", "-I", "2m", "-vv", "-o", "modern",
				}))
				// 256 + 16 + 256/8 + 4096/64.
				g.Expect((*d.Spec.Template.Spec.Containers[0].Resources.Requests)[corev1.ResourceMemory]).To(Equal(resource.MustParse("368Mi")))
			},
		},
		{
			name: "user resources replace the defaults",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Resources = &corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				r := d.Spec.Template.Spec.Containers[0].Resources
				g.Expect(*r.Limits).To(Equal(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}))
				g.Expect(r.Requests).To(BeNil())
			},
		},
		{
			name: "scheduling fields are copied",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.NodeSelector = map[string]string{"pool": "cache"}
				m.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
				m.Spec.PriorityClassName = "high"
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				pod := d.Spec.Template.Spec
				g.Expect(pod.NodeSelector).To(Equal(map[string]string{"pool": "cache"}))
				g.Expect(pod.Tolerations).To(HaveLen(1))
				g.Expect(*pod.Tolerations[0].Key).To(Equal("dedicated"))
				g.Expect(*pod.PriorityClassName).To(Equal("high"))
			},
		},
		{
			name: "hard anti-affinity is required",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityHard}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				aa := d.Spec.Template.Spec.Affinity.PodAntiAffinity
				g.Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
				term := aa.RequiredDuringSchedulingIgnoredDuringExecution[0]
				g.Expect(*term.TopologyKey).To(Equal("kubernetes.io/hostname"))
				g.Expect(term.LabelSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
				g.Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
			},
		},
		{
			name: "no anti-affinity",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityNone}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(d.Spec.Template.Spec.Affinity).To(BeNil())
			},
		},
		{
			name: "topology spread without a selector gets the instance selector",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
					{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway},
					{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"custom": "x"}}},
				}}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				tsc := d.Spec.Template.Spec.TopologySpreadConstraints
				g.Expect(tsc).To(HaveLen(2))
				g.Expect(tsc[0].LabelSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
				g.Expect(tsc[1].LabelSelector.MatchLabels).To(Equal(map[string]string{"custom": "x"}))
			},
		},
		{
			name: "pull policy and secrets reach every container and the pod",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.ImagePullPolicy = corev1.PullAlways
				m.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				pod := d.Spec.Template.Spec
				g.Expect(pod.Containers).To(HaveLen(2))
				for _, c := range pod.Containers {
					g.Expect(*c.ImagePullPolicy).To(Equal(corev1.PullAlways), *c.Name)
				}
				g.Expect(pod.ImagePullSecrets).To(HaveLen(1))
				g.Expect(*pod.ImagePullSecrets[0].Name).To(Equal("registry"))
			},
		},
		{
			name: "pod metadata joins the operator's, which wins",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.PodMetadata = &cachev1alpha1.PodMetadata{
					Labels:      map[string]string{"team": "payments", "sidecar.istio.io/inject": "false"},
					Annotations: map[string]string{"example.com/cost-center": "42"},
				}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				tpl := d.Spec.Template
				g.Expect(tpl.Labels).To(HaveKeyWithValue("team", "payments"))
				g.Expect(tpl.Labels).To(HaveKeyWithValue(LabelInstance, "memcached-sample"))
				g.Expect(tpl.Annotations).To(HaveKeyWithValue("example.com/cost-center", "42"))
				g.Expect(tpl.Annotations).To(HaveKey(ConfigHashAnnotation))
				g.Expect(d.Labels).NotTo(HaveKey("team"), "pod labels stay on the pods")
			},
		},
		{
			name:   "service account",
			mutate: func(m *cachev1alpha1.Memcached) { m.Spec.ServiceAccountName = "cache" },
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(*d.Spec.Template.Spec.ServiceAccountName).To(Equal("cache"))
				g.Expect(*d.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
			},
		},
		{
			name: "platform-assigned user leaves uid and gid unset",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.PodSecurity = &cachev1alpha1.PodSecuritySpec{UserID: cachev1alpha1.UserIDPlatform}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				sc := d.Spec.Template.Spec.SecurityContext
				g.Expect(sc.RunAsUser).To(BeNil())
				g.Expect(sc.RunAsGroup).To(BeNil())
				g.Expect(*sc.RunAsNonRoot).To(BeTrue(), "restricted still holds")
			},
		},
		{
			name:   "revision history",
			mutate: func(m *cachev1alpha1.Memcached) { m.Spec.RevisionHistoryLimit = ptr.To[int32](2) },
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				g.Expect(*d.Spec.RevisionHistoryLimit).To(Equal(int32(2)))
			},
		},
		{
			name: "user affinity is kept and the anti-affinity term added to it",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Affinity = &corev1.Affinity{
					NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"m7g.large"}},
						}}},
					}},
					PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
						{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}},
					}},
				}
				m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityHard}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				a := d.Spec.Template.Spec.Affinity
				g.Expect(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(HaveLen(1))
				terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
				g.Expect(terms).To(HaveLen(2))
				g.Expect(terms[0].LabelSelector.MatchLabels).To(Equal(map[string]string{"app": "noisy"}))
				g.Expect(terms[1].LabelSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
			},
		},
		{
			name: "user affinity without the operator's term when antiAffinity is None",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
					{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
				}}}
				m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: cachev1alpha1.AntiAffinityNone}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				a := d.Spec.Template.Spec.Affinity
				g.Expect(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
				g.Expect(a.PodAntiAffinity).To(BeNil())
			},
		},
		{
			name: "exporter sidecar with the default image",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				i, ok := container(d, "exporter")
				g.Expect(ok).To(BeTrue())
				c := d.Spec.Template.Spec.Containers[i]
				g.Expect(*c.Image).To(Equal("exporter:default"))
				g.Expect(*c.Ports[0].ContainerPort).To(Equal(int32(9150)))
				g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
			},
		},
		{
			name: "exporter with its own image",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true, Image: "exporter:pinned"}}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				i, _ := container(d, "exporter")
				g.Expect(*d.Spec.Template.Spec.Containers[i].Image).To(Equal("exporter:pinned"))
			},
		},
		{
			name: "exporter configured but disabled",
			mutate: func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Image: "exporter:pinned"}}
			},
			check: func(g Gomega, d *appsv1ac.DeploymentApplyConfiguration) {
				_, ok := container(d, "exporter")
				g.Expect(ok).To(BeFalse())
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(NewWithT(t), Deployment(seed(tt.mutate), testOptions))
		})
	}
}

func TestMemcachedSize(t *testing.T) {
	for in, want := range map[string]string{"1Mi": "1m", "512Ki": "512k", "1Gi": "1024m", "1500": "1500", "3072Ki": "3m"} {
		q := resource.MustParse(in)
		if got := memcachedSize(&q); got != want {
			t.Errorf("memcachedSize(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigHashFollowsTheConfiguration(t *testing.T) {
	g := NewWithT(t)
	hash := func(m *cachev1alpha1.Memcached) string {
		return Deployment(m, testOptions).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	base := hash(seed())
	g.Expect(hash(seed())).To(Equal(base), "the hash must be stable")
	g.Expect(hash(seed(func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](5) }))).To(Equal(base),
		"scaling is not a configuration change and must not roll the pods")
	g.Expect(hash(seed(func(m *cachev1alpha1.Memcached) {
		m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](128)}
	}))).NotTo(Equal(base))
}

// The desired hash is what lets the reconciler notice that a field was
// removed from the desired object (a subset comparison cannot).
func TestDesiredHashSeesRemovedFields(t *testing.T) {
	g := NewWithT(t)
	with := Deployment(seed(func(m *cachev1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"pool": "cache"} }), testOptions)
	without := Deployment(seed(), testOptions)
	g.Expect(with.Annotations[DesiredHashAnnotation]).NotTo(Equal(without.Annotations[DesiredHashAnnotation]))
	g.Expect(Deployment(seed(), testOptions).Annotations).To(Equal(without.Annotations))
}

func TestService(t *testing.T) {
	g := NewWithT(t)
	s := Service(seed())
	g.Expect(*s.Name).To(Equal("memcached-sample"))
	g.Expect(*s.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(s.Spec.Ports).To(HaveLen(1))
	g.Expect(*s.Spec.Ports[0].Port).To(Equal(int32(11211)))
	g.Expect(*s.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("memcached")))
	g.Expect(*s.OwnerReferences[0].Controller).To(BeTrue())

	withExporter := Service(seed(func(m *cachev1alpha1.Memcached) {
		m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
	}))
	g.Expect(withExporter.Spec.Ports).To(HaveLen(2))
	g.Expect(*withExporter.Spec.Ports[1].Name).To(Equal("metrics"))
	g.Expect(*withExporter.Spec.Ports[1].Port).To(Equal(int32(9150)))
}

func TestPodDisruptionBudget(t *testing.T) {
	pdbSpec := func(p cachev1alpha1.PodDisruptionBudgetSpec) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) {
			m.Spec.HighAvailability = &cachev1alpha1.HighAvailabilitySpec{PodDisruptionBudget: &p}
		}
	}
	size := func(n int32) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To(n) }
	}
	tests := []struct {
		name               string
		mutate             []func(*cachev1alpha1.Memcached)
		wantNone           bool
		wantMinAvailable   *intstr.IntOrString
		wantMaxUnavailable *intstr.IntOrString
	}{
		{name: "default with several pods", wantMaxUnavailable: ptr.To(intstr.FromInt32(1))},
		{name: "default with one pod: none, it would block drains", mutate: []func(*cachev1alpha1.Memcached){size(1)}, wantNone: true},
		{name: "explicitly disabled", mutate: []func(*cachev1alpha1.Memcached){pdbSpec(cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)})}, wantNone: true},
		{name: "explicitly enabled with one pod", mutate: []func(*cachev1alpha1.Memcached){size(1), pdbSpec(cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(true)})}, wantMaxUnavailable: ptr.To(intstr.FromInt32(1))},
		{name: "minAvailable", mutate: []func(*cachev1alpha1.Memcached){pdbSpec(cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))})}, wantMinAvailable: ptr.To(intstr.FromString("50%"))},
		{name: "maxUnavailable", mutate: []func(*cachev1alpha1.Memcached){pdbSpec(cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))})}, wantMaxUnavailable: ptr.To(intstr.FromInt32(2))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := PodDisruptionBudget(seed(tt.mutate...))
			if tt.wantNone {
				g.Expect(p).To(BeNil())
				return
			}
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(seed())))
			g.Expect(p.Spec.MinAvailable).To(Equal(tt.wantMinAvailable))
			g.Expect(p.Spec.MaxUnavailable).To(Equal(tt.wantMaxUnavailable))
		})
	}
}

func TestOwnedObjectsShareLabelsAndOwner(t *testing.T) {
	g := NewWithT(t)
	m := seed()
	d, s, p := Deployment(m, testOptions), Service(m), PodDisruptionBudget(m)
	for _, labels := range []map[string]string{d.Labels, s.Labels, p.Labels} {
		g.Expect(labels).To(Equal(Labels(m)))
	}
	for _, name := range []*string{d.OwnerReferences[0].Name, s.OwnerReferences[0].Name, p.OwnerReferences[0].Name} {
		g.Expect(*name).To(Equal(m.Name))
	}
	g.Expect(strings.HasPrefix(Selector(m), LabelInstance+"=")).To(BeTrue())
}
