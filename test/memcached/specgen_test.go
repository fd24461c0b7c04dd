package memcached_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// specGenerator draws random, valid-looking Memcached specs from a seed:
// every field of the API, values at and around their bounds, and a few
// plausible mistakes, so that both what the CRD accepts and what it refuses
// are exercised. Whether a spec is valid is for the apiserver to say, not
// for the generator.
type specGenerator struct{ r *rand.Rand }

func newSpecGenerator(seed uint64) *specGenerator {
	return &specGenerator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *specGenerator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *specGenerator, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func (g *specGenerator) spec(i int) *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i)}}
	if g.chance(0.03) {
		m.Name = pick(g, strings.Repeat("n", 64), fmt.Sprintf("p.%04d", i), fmt.Sprintf("P-%04d", i), fmt.Sprintf("%04d-p", i))
	}
	s := &m.Spec
	s.Size = ptr.To(pick(g, int32(0), 1, 2, 3, 5, 64, int32(g.r.IntN(65))))
	if g.chance(0.02) {
		s.Size = ptr.To[int32](65)
	}
	if g.chance(0.3) {
		s.Image = pick(g, "memcached:1.6.39-alpine", "memcached:1.6.39", "docker.io/library/memcached:1.6",
			"registry.example.com:5000/cache/memcached@sha256:"+strings.Repeat("ab", 32),
			"registry.example.com/cache/memcached:1.6.39@sha256:"+strings.Repeat("0f", 32), "memcached latest", "Memcached:1")
	}
	if g.chance(0.2) {
		s.ImagePullPolicy = pick(g, corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
	}
	if g.chance(0.1) {
		s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror.credentials"}}[:1+g.r.IntN(2)]
	}
	if g.chance(0.2) {
		s.NodeSelector = map[string]string{pick(g, "kubernetes.io/os", "pool", "node.example.com/class"): pick(g, "linux", "cache", "m7g.large", "")}
	}
	if g.chance(0.2) {
		s.Tolerations = []corev1.Toleration{g.toleration()}
		if g.chance(0.3) {
			s.Tolerations = append(s.Tolerations, g.toleration())
		}
	}
	if g.chance(0.15) {
		s.Affinity = g.affinity()
	}
	if g.chance(0.15) {
		s.PriorityClassName = priorityClass
	}
	if g.chance(0.15) {
		s.ServiceAccountName = cacheServiceAcount
	}
	if g.chance(0.15) {
		s.PodMetadata = &cachev1alpha1.PodMetadata{
			Labels:      map[string]string{pick(g, "team", "example.com/tier", "sidecar.istio.io/inject"): pick(g, "payments", "a-b_c.d", "false")},
			Annotations: map[string]string{"example.com/note": pick(g, "", "cache for the checkout service", strings.Repeat("x", 500))},
		}
		if g.chance(0.1) {
			s.PodMetadata.Labels["app.kubernetes.io/instance"] = "someone-else"
		}
	}
	if g.chance(0.25) {
		s.PodSecurity = &cachev1alpha1.PodSecuritySpec{UserID: pick(g, cachev1alpha1.UserIDFixed, cachev1alpha1.UserIDPlatform)}
	}
	if g.chance(0.2) {
		s.RevisionHistoryLimit = ptr.To(pick(g, int32(0), 1, 10, 100, int32(g.r.IntN(101))))
	}
	if g.chance(0.75) {
		s.Memcached = g.memcachedConfig()
	}
	if g.chance(0.4) {
		s.Resources = g.resources(m)
	}
	if g.chance(0.4) {
		s.HighAvailability = g.highAvailability()
	}
	if g.chance(0.3) {
		e := &cachev1alpha1.ExporterSpec{Enabled: g.chance(0.8)}
		if g.chance(0.3) {
			e.Image = pick(g, "quay.io/prometheus/memcached-exporter:v0.14.4", "registry.example.com/memcached-exporter@sha256:"+strings.Repeat("c3", 32))
		}
		if g.chance(0.2) {
			e.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick(g, "32Mi", "64Mi"))}}
		}
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: e}
	}
	if g.chance(0.25) {
		s.Security = g.security()
	}
	if g.chance(0.3) {
		// Mostly Stable when asked, rarely unknown.
		s.Identity = pick(g, cachev1alpha1.IdentityStable, cachev1alpha1.IdentityStable, cachev1alpha1.IdentityEphemeral)
		if g.chance(0.05) {
			s.Identity = "Sticky"
		}
		if s.Identity == cachev1alpha1.IdentityStable && g.chance(0.05) {
			m.Name = strings.Repeat("s", cachev1alpha1.MaxStableNameLength+1)
		}
	}
	if g.chance(0.2) {
		// warmRestart needs Stable, which it mostly has here.
		if s.Memcached == nil {
			s.Memcached = &cachev1alpha1.MemcachedConfig{}
		}
		w := &cachev1alpha1.WarmRestartSpec{Enabled: g.chance(0.9)}
		if g.chance(0.4) {
			w.StorageClassName = ptr.To(pick(g, "memcached-ram", "local-tmpfs.example.com", "dax", "pmem-fsdax", "RAM"))
		}
		s.Memcached.WarmRestart = w
		if g.chance(0.9) {
			s.Identity = cachev1alpha1.IdentityStable
		}
	}
	return m
}

// security draws spec.security over the harness's Secrets
// (withSecuritySecrets), with the combinations the CRD refuses among them:
// neither TLS nor auth, a plaintext port on a port the pod already uses.
func (g *specGenerator) security() *cachev1alpha1.SecuritySpec {
	sec := &cachev1alpha1.SecuritySpec{AllowFlushAll: g.chance(0.2)}
	if g.chance(0.75) {
		t := &cachev1alpha1.TLSSpec{SecretName: tlsSecret}
		if g.chance(0.02) {
			t.SecretName = "Cache_TLS"
		}
		if g.chance(0.7) {
			t.ClientCertificates = pick(g, cachev1alpha1.ClientCertificatesNone, cachev1alpha1.ClientCertificatesRequest,
				cachev1alpha1.ClientCertificatesRequire, cachev1alpha1.ClientCertificatesRequire)
		}
		if g.chance(0.03) {
			t.ClientCertificates = "Optional"
		}
		if g.chance(0.4) {
			t.MinVersion = pick(g, cachev1alpha1.TLSVersion12, cachev1alpha1.TLSVersion13)
		}
		if g.chance(0.03) {
			t.MinVersion = "1.1"
		}
		if g.chance(0.25) {
			t.PlaintextPort = ptr.To(pick(g, int32(11212), 11213, 21211, 1024+int32(g.r.IntN(64000))))
		}
		if g.chance(0.04) {
			t.PlaintextPort = ptr.To(pick(g, int32(11211), 11210, 9150, 0, 70000))
		}
		sec.TLS = t
	}
	// Neither TLS nor auth is refused; drawn now and then.
	if sec.TLS == nil && g.chance(0.9) || g.chance(0.35) {
		sec.Auth = &cachev1alpha1.AuthSpec{SecretName: authSecret}
		if g.chance(0.02) {
			sec.Auth.SecretName = "cache auth"
		}
	}
	return sec
}

func (g *specGenerator) memcachedConfig() *cachev1alpha1.MemcachedConfig {
	c := &cachev1alpha1.MemcachedConfig{}
	if g.chance(0.6) {
		c.MaxMemoryMB = ptr.To(pick(g, int32(8), 16, 32, 64, 100, 512, 4096, 1048576, 8+int32(g.r.IntN(2048))))
	}
	if g.chance(0.5) {
		c.Threads = ptr.To(pick(g, int32(1), 2, 4, 16, 64, 1+int32(g.r.IntN(64))))
	}
	if g.chance(0.5) {
		threads := ptr.Deref(c.Threads, 4)
		c.MaxConnections = ptr.To(pick(g, 5*threads+16, 5*threads+15, int32(1024), 65536, 4096, 1+int32(g.r.IntN(8192))))
	}
	if g.chance(0.4) {
		size := pick(g, "512Ki", "1Mi", "1536Ki", "2Mi", "4Mi", "1048576", "3145728")
		if g.chance(0.2) { // not a multiple of 512Ki, or more than half of most memory sizes
			size = pick(g, "256Ki", "768Ki", "64Mi", "1Gi")
		}
		c.MaxItemSize = ptr.To(resource.MustParse(size))
	}
	if g.chance(0.3) {
		c.Verbosity = int32(g.r.IntN(3))
	}
	if g.chance(0.4) {
		for range 1 + g.r.IntN(3) {
			group := pick(g, extraArgGroups...)
			if g.chance(0.08) {
				group = pick(g, extraArgMistakes...)
			}
			c.ExtraArgs = append(c.ExtraArgs, group...)
		}
	}
	return c
}

// extraArgGroups are option groups users write; a few are wrong on purpose.
var extraArgGroups = [][]string{
	{"-o", "modern"}, {"-o", "lru_crawler,lru_maintainer"}, {"--extended", "hash_algorithm=xxh3"},
	{"-o", "slab_reassign,slab_automove=1,slab_automove_ratio=0.8,slab_automove_window=30"},
	{"-o", "hot_lru_pct=20,warm_lru_pct=40,hot_max_factor=0.2,warm_max_factor=2.0"},
	{"-o", "idle_timeout=600,tail_repair_time=60,lru_crawler_sleep=100,lru_crawler_tocrawl=0"},
	{"-o", "read_buf_mem_limit=64,track_sizes,no_maxconns_fast"},
	{"-M"}, {"-C"}, {"-F"}, {"-X"}, {"-W"}, {"-A"}, {"-r"}, {"-k"},
	{"--disable-evictions"}, {"--disable-cas"}, {"--enable-coredumps"},
	{"-f", "1.08"}, {"-f", "2"}, {"-n", "48"}, {"-R", "20"}, {"-b", "4096"}, {"-D", ":"}, {"-a", "0700"},
	{"--slab-growth-factor", "1.25"}, {"--max-reqs-per-event", "40"}, {"--listen-backlog", "1024"}, {"--slab-min-size", "96"},
}

// extraArgMistakes: managed options, clusters, abbreviations, typos, bad values.
var extraArgMistakes = [][]string{
	{"-m", "128"}, {"-Mm4096"}, {"--conn=10"}, {"-vv"}, {"--threads=8"}, {"-d"}, {"-o", "hashpower=20"},
	{"-o", "modren"}, {"-f", "1.0"}, {"-n", "0"}, {"modern"}, {"-o"},
}

func (g *specGenerator) toleration() corev1.Toleration {
	t := corev1.Toleration{Key: pick(g, "dedicated", "node.kubernetes.io/unreachable", "example.com/gpu"), Operator: corev1.TolerationOpEqual, Value: pick(g, "cache", "true")}
	switch g.r.IntN(5) {
	case 0:
		t.Operator, t.Value = corev1.TolerationOpExists, ""
	case 1:
		t.Effect = corev1.TaintEffectNoExecute
		t.TolerationSeconds = ptr.To[int64](300)
	case 2:
		t.Effect = pick(g, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule)
	case 3:
		t = corev1.Toleration{Operator: corev1.TolerationOpExists}
	}
	if g.chance(0.05) { // Exists with a value: invalid
		t.Operator, t.Value = corev1.TolerationOpExists, "x"
	}
	return t
}

func (g *specGenerator) affinity() *corev1.Affinity {
	a := &corev1.Affinity{}
	term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		pick(g,
			corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
			corev1.NodeSelectorRequirement{Key: "node.example.com/spot", Operator: corev1.NodeSelectorOpDoesNotExist},
			corev1.NodeSelectorRequirement{Key: "node.example.com/cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}),
	}}
	switch g.r.IntN(3) {
	case 0:
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}
	case 1:
		a.NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: int32(1 + g.r.IntN(100)), Preference: term}}}
	default:
		a.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		}}}
	}
	return a
}

func (g *specGenerator) resources(m *cachev1alpha1.Memcached) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{}
	memory, conns := int32(64), int32(1024)
	if c := m.Spec.Memcached; c != nil {
		memory, conns = ptr.Deref(c.MaxMemoryMB, 64), ptr.Deref(c.MaxConnections, 1024)
	}
	floor := cachev1alpha1.MinimumMemoryMiB(memory, conns)
	if g.chance(0.8) {
		mib := floor + pick(g, int64(0), 1, 64, 1024, 4096)
		if g.chance(0.1) { // one MiB below the CRD's floor
			mib = floor - 1
		}
		r.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(mib<<20, resource.BinarySI)}
		if g.chance(0.5) {
			r.Requests = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(floor<<20, resource.BinarySI)}
		}
	}
	if g.chance(0.5) {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceCPU] = resource.MustParse(pick(g, "100m", "1", "250m"))
		if g.chance(0.5) {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[corev1.ResourceCPU] = resource.MustParse(pick(g, "1", "2", "50m"))
		}
	}
	return r
}

func (g *specGenerator) highAvailability() *cachev1alpha1.HighAvailabilitySpec {
	h := &cachev1alpha1.HighAvailabilitySpec{AntiAffinity: pick(g, cachev1alpha1.AntiAffinity(""), cachev1alpha1.AntiAffinityNone, cachev1alpha1.AntiAffinitySoft, cachev1alpha1.AntiAffinityHard)}
	if g.chance(0.3) {
		h.MinReadySeconds = ptr.To(pick(g, int32(0), 2, 3, 10, 30, 60, 300))
	}
	if g.chance(0.3) {
		h.DrainSeconds = ptr.To(pick(g, int32(0), 1, 2, 5, 10, 30, 300))
	}
	if g.chance(0.05) { // above the CRD's maximum of 300
		h.MinReadySeconds, h.DrainSeconds = pick(g, ptr.To[int32](301), h.MinReadySeconds), pick(g, ptr.To[int32](301), h.DrainSeconds)
	}
	if g.chance(0.3) {
		h.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: pick(g, int32(1), 2), TopologyKey: pick(g, "topology.kubernetes.io/zone", "kubernetes.io/hostname"),
			WhenUnsatisfiable: pick(g, corev1.DoNotSchedule, corev1.ScheduleAnyway),
		}}
		if h.TopologySpreadConstraints[0].WhenUnsatisfiable == corev1.DoNotSchedule && g.chance(0.3) {
			h.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](2)
		}
	}
	if g.chance(0.5) {
		p := &cachev1alpha1.PodDisruptionBudgetSpec{}
		switch g.r.IntN(5) {
		case 0:
			p.Enabled = ptr.To(g.chance(0.5))
		case 1:
			p.MinAvailable = ptr.To(pick(g, intstr.FromInt32(1), intstr.FromString("50%"), intstr.FromInt32(2)))
		case 2:
			p.MaxUnavailable = ptr.To(pick(g, intstr.FromInt32(1), intstr.FromString("25%"), intstr.FromInt32(0)))
		case 3:
			p.MinAvailable, p.MaxUnavailable = ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1))
		}
		h.PodDisruptionBudget = p
	}
	return h
}
