//go:build !unit

package controller

import (
	"fmt"
	"strings"
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

	extraArgs := func(args ...string) func(*cachev1alpha1.Memcached) {
		return cfg(cachev1alpha1.MemcachedConfig{ExtraArgs: args})
	}
	named := func(name string) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) { m.Name = name }
	}

	tests := []struct {
		name    string
		size    int32
		mutate  func(*cachev1alpha1.Memcached)
		message []string
	}{
		{"warm restart without stable identities", 1, cfg(cachev1alpha1.MemcachedConfig{WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true}}),
			[]string{"spec.memcached.warmRestart needs spec.identity: Stable"}},
		{"a stable name too long for the StatefulSet's labels", 1, func(m *cachev1alpha1.Memcached) {
			m.Name = strings.Repeat("s", cachev1alpha1.MaxStableNameLength+1)
			m.Spec.Identity = cachev1alpha1.IdentityStable
		}, []string{"spec.identity: Stable must be at most 52 characters"}},
		{"an unknown identity", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Identity = "Sticky" }, []string{"spec.identity", "Unsupported value"}},
		{"warm restart in too little memory for its slab pages", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Identity = cachev1alpha1.IdentityStable
			m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](32), WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true}}
		}, []string{"spec.memcached.warmRestart needs maxMemoryMB of at least 64"}},
		{"a drain longer than five minutes", 1, ha(cachev1alpha1.HighAvailabilitySpec{DrainSeconds: ptr.To[int32](301)}), []string{"spec.highAvailability.drainSeconds"}},
		{"a warm restart storage class that is no name", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Identity = cachev1alpha1.IdentityStable
			m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true, StorageClassName: ptr.To("RAM Disk")}}
		}, []string{"spec.memcached.warmRestart.storageClassName must be the name of a StorageClass"}},
		{"extstore's -o ext_path, which warm restart cannot be combined with", 1, extraArgs("-o", "ext_path=/data/extstore:1G"), []string{"spec.memcached.extraArgs"}},
		{"a memory file of one's own", 1, extraArgs("-e", "/tmp/memory"), []string{"spec.memcached.extraArgs"}},
		{"security with neither tls nor auth", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Security = &cachev1alpha1.SecuritySpec{} }, []string{"spec.security must set tls, auth or both"}},
		{"plaintext port on the TLS port", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", PlaintextPort: ptr.To[int32](11211)}}
		}, []string{"spec.security.tls.plaintextPort must differ from 11211"}},
		{"plaintext port on the loopback listener", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", PlaintextPort: ptr.To[int32](11210)}}
		}, []string{"spec.security.tls.plaintextPort"}},
		{"unknown client certificate mode", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: "Optional"}}
		}, []string{"spec.security.tls.clientCertificates", "Unsupported value"}},
		{"TLS 1.1", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", MinVersion: "1.1"}}
		}, []string{"spec.security.tls.minVersion", "Unsupported value"}},
		{"Secret name with upper case", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "Auth"}}
		}, []string{"spec.security.auth.secretName must be the name of a Secret"}},
		{"plaintext port on the exporter's authenticating proxy", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", PlaintextPort: ptr.To[int32](11209)}}
		}, []string{"spec.security.tls.plaintextPort must differ", "11209 (the exporter's authenticating proxy)"}},
		{"negative size", -1, nil, []string{"spec.size", "greater than or equal to 0"}},
		{"size above 64", 65, nil, []string{"spec.size", "less than or equal to 64"}},
		{"name longer than a label value", 1, named(strings.Repeat("a", 64)), []string{"metadata.name", "at most 63"}},
		{"name with a dot", 1, named("cache.v2"), []string{"metadata.name", "DNS-1035 label"}},
		{"name starting with a digit", 1, named("1cache"), []string{"metadata.name", "starting with a letter"}},
		{"image with spaces", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Image = "memcached 1.6" }, []string{"spec.image", "must be an image reference"}},
		{"image with an upper-case path", 1, func(m *cachev1alpha1.Memcached) { m.Spec.Image = "example.com/Cache/memcached:1" }, []string{"spec.image"}},
		{"unknown pull policy", 1, func(m *cachev1alpha1.Memcached) { m.Spec.ImagePullPolicy = "Sometimes" }, []string{"spec.imagePullPolicy", "Unsupported value"}},
		{"service account with upper case", 1, func(m *cachev1alpha1.Memcached) { m.Spec.ServiceAccountName = "Cache" }, []string{"spec.serviceAccountName"}},
		{"priority class with a space", 1, func(m *cachev1alpha1.Memcached) { m.Spec.PriorityClassName = "high priority" }, []string{"spec.priorityClassName"}},
		{"pod label that would steal the selector", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.PodMetadata = &cachev1alpha1.PodMetadata{Labels: map[string]string{"app.kubernetes.io/instance": "other"}}
		}, []string{"spec.podMetadata.labels", "must not set app.kubernetes.io/name, instance or managed-by"}},
		{"pod annotation in the operator's prefix", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.PodMetadata = &cachev1alpha1.PodMetadata{Annotations: map[string]string{"cache.example.com/config-hash": "x"}}
		}, []string{"spec.podMetadata.annotations", "cache.example.com/"}},
		{"unknown user id policy", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.PodSecurity = &cachev1alpha1.PodSecuritySpec{UserID: "Root"}
		}, []string{"spec.podSecurity.userID", "Unsupported value"}},
		{"negative revision history", 1, func(m *cachev1alpha1.Memcached) { m.Spec.RevisionHistoryLimit = ptr.To[int32](-1) }, []string{"spec.revisionHistoryLimit"}},
		{"too little memory", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](4)}), []string{"spec.memcached.maxMemoryMB", "greater than or equal to 8"}},
		{"zero connections", 1, cfg(cachev1alpha1.MemcachedConfig{MaxConnections: ptr.To[int32](0)}), []string{"spec.memcached.maxConnections"}},
		// memcached 1.6 with -c 1 -t 1: "Too many open files"; with -c 12 -t 1: "Maxconns setting is too low".
		{"too few connections for the threads (measured: memcached exits 1)", 1, cfg(cachev1alpha1.MemcachedConfig{MaxConnections: ptr.To[int32](1), Threads: ptr.To[int32](1)}), []string{"spec.memcached.maxConnections", "at least 5 x threads + 16"}},
		{"too few connections for the default threads", 1, cfg(cachev1alpha1.MemcachedConfig{MaxConnections: ptr.To[int32](35)}), []string{"spec.memcached.maxConnections", "36 with the default 4 threads"}},
		{"zero threads", 1, cfg(cachev1alpha1.MemcachedConfig{Threads: ptr.To[int32](0)}), []string{"spec.memcached.threads"}},
		{"verbosity 3", 1, cfg(cachev1alpha1.MemcachedConfig{Verbosity: 3}), []string{"spec.memcached.verbosity", "less than or equal to 2"}},
		{"item size 1m means a milli-byte", 1, cfg(cachev1alpha1.MemcachedConfig{MaxItemSize: quantity("1m")}), []string{"spec.memcached.maxItemSize", "multiple of 512Ki", "1m means one thousandth"}},
		// memcached 1.6: "slab_chunk_max (bytes: 524288) cannot be larger than -I (item_size_max 262144)".
		{"item size below the slab chunk (measured: memcached exits 64)", 1, cfg(cachev1alpha1.MemcachedConfig{MaxItemSize: quantity("256Ki")}), []string{"spec.memcached.maxItemSize", "multiple of 512Ki"}},
		// memcached 1.6: "-I (item_size_max: 786432) must be evenly divisible by slab_chunk_max (bytes: 524288)".
		{"item size not a multiple of the slab chunk (measured: memcached exits 64)", 1, cfg(cachev1alpha1.MemcachedConfig{MaxItemSize: quantity("768Ki")}), []string{"spec.memcached.maxItemSize", "multiple of 512Ki"}},
		{"item size above 1Gi", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](8192), MaxItemSize: quantity("2Gi")}), []string{"spec.memcached.maxItemSize", "between 512Ki and 1Gi"}},
		{"item size above half the memory", 1, cfg(cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To[int32](64), MaxItemSize: quantity("33Mi")}), []string{"spec.memcached.maxItemSize", "at most half of spec.memcached.maxMemoryMB"}},
		{"extra args set the memory", 1, extraArgs("-m", "1024"), []string{"spec.memcached.extraArgs: -m sets an option the operator manages"}},
		{"extra args set the port (long form)", 1, extraArgs("--port=1"), []string{"spec.memcached.extraArgs: --port=1 sets an option the operator manages"}},
		{"extra args cluster the memory behind another flag", 1, extraArgs("-Mm4096"), []string{"-Mm4096 sets an option the operator manages"}},
		{"extra args cluster verbosity and daemon", 1, extraArgs("-vd"), []string{"-vd sets an option the operator manages"}},
		{"extra args abbreviate --conn-limit", 1, extraArgs("--conn=1"), []string{"--conn=1 sets an option the operator manages"}},
		{"extra args abbreviate --port", 1, extraArgs("--po=1"), []string{"--po=1 sets an option the operator manages"}},
		{"extra args daemonize", 1, extraArgs("-d"), []string{"-d is not accepted", "daemonize"}},
		{"extra args print the version and exit", 1, extraArgs("--version"), []string{"--version is not accepted"}},
		{"extra args cluster harmless flags", 1, extraArgs("-MC"), []string{"-MC is not accepted", "no clustering"}},
		{"extra args with a stray word", 1, extraArgs("modern"), []string{"modern is not accepted"}},
		{"extra args end with an option that wants a value", 1, extraArgs("-o"), []string{"must be followed by its value"}},
		{"extra args give an option as a value", 1, extraArgs("-o", "-M"), []string{"must not start with '-'"}},
		{"extra args with an unknown suboption", 1, extraArgs("-o", "modern,frobnicate"), []string{"-o takes a comma-separated list"}},
		{"extra args change the slab chunk size", 1, extraArgs("-o", "slab_chunk_max=16384"), []string{"slab_chunk_max"}},
		{"extra args with a growth factor of one", 1, extraArgs("-f", "1"), []string{"-f a growth factor above 1"}},
		{"unknown anti-affinity", 1, ha(cachev1alpha1.HighAvailabilitySpec{AntiAffinity: "Maybe"}), []string{"spec.highAvailability.antiAffinity", "Unsupported value", "Soft"}},
		{"budget with both bounds", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}), []string{"spec.highAvailability.podDisruptionBudget", "either minAvailable or maxUnavailable"}},
		{"budget allowing no disruption", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0))}), []string{"spec.highAvailability.podDisruptionBudget.maxUnavailable", "positive integer"}},
		{"budget with a word for a percentage", 3, pdb(cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("half"))}), []string{"spec.highAvailability.podDisruptionBudget.minAvailable", "percentage"}},
		{"spread with zero skew", 3, ha(cachev1alpha1.HighAvailabilitySpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 0, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}}}), []string{"maxSkew must be at least 1"}},
		{"toleration with Exists and a value", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "cache"}}
		}, []string{"spec.tolerations", "operator Exists must not have a value"}},
		{"toleration seconds without NoExecute", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)}}
		}, []string{"tolerationSeconds applies only to effect NoExecute"}},
		// The floor is MinimumMemoryMiB: 64 + 16 + 8 + 16 = 104Mi with the defaults.
		{"memory limit below memcached's memory", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("103Mi")}}
		}, []string{"spec.resources.limits", "at least maxMemoryMB + 16Mi"}},
		{"memory limit below the connection buffers", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxConnections: ptr.To[int32](16384)}
			m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")}}
		}, []string{"spec.resources.limits", "maxConnections x 16Ki"}},
		{"request above the limit", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}, []string{"spec.resources", "each request must be at most its limit"}},
		{"unknown resource name", 1, func(m *cachev1alpha1.Memcached) {
			m.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"gpu": resource.MustParse("1")}}
		}, []string{"spec.resources.requests may name cpu, memory"}},
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
	g.Expect(cur.Spec.HighAvailability.MinReadySeconds).To(HaveValue(Equal(cachev1alpha1.DefaultMinReadySeconds)))
	g.Expect(cur.Spec.HighAvailability.DrainSeconds).To(HaveValue(Equal(cachev1alpha1.DefaultDrainSeconds)))
	g.Expect(cur.Spec.Identity).To(Equal(cachev1alpha1.IdentityEphemeral))

	noSize := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "no-size", "namespace": ns},
		"spec":     map[string]any{},
	}}
	g.Expect(k8sClient.Create(testCtx, noSize)).To(Succeed())
	size, _, _ := unstructured.NestedInt64(noSize.Object, "spec", "size")
	g.Expect(size).To(Equal(int64(1)))
}

// What the rules must let through: the tuning options users reach for, in
// the spellings the field documents.
func TestValidExtraArgsAreAccepted(t *testing.T) {
	ns := newNamespace(t)
	for i, args := range [][]string{
		{"-o", "modern"},
		{"--extended", "lru_crawler,hash_algorithm=xxh3,slab_automove=2"},
		{"-M", "-C", "-F", "-X", "-W", "-A", "-k", "-r"},
		{"--disable-evictions", "--disable-cas", "--enable-shutdown"},
		{"-f", "1.08", "-n", "72", "-R", "40", "-b", "2048", "-D", ":"},
		{"--slab-growth-factor", "1.5", "--slab-min-size", "48", "--max-reqs-per-event", "20", "--listen-backlog", "4096"},
		{"-o", "hot_lru_pct=40,warm_lru_pct=40,hot_max_factor=0.2,warm_max_factor=2.0,slab_automove_ratio=0.8,slab_automove_window=30,tail_repair_time=0,idle_timeout=600,lru_crawler_sleep=100,lru_crawler_tocrawl=0,read_buf_mem_limit=64"},
		{"-a", "0700"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			mc := newMemcached(ns, "accepted-"+string(rune('a'+i)), 1, func(m *cachev1alpha1.Memcached) {
				m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{ExtraArgs: args}
			})
			err := k8sClient.Create(testCtx, mc, client.DryRunAll)
			if strings.Contains(strings.Join(args, " "), "tail_repair_time=0") {
				// memcached refuses tail_repair_time below 10.
				NewWithT(t).Expect(err).To(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		})
	}
}

// With warm restart, memcached's memory file gives every slab class a page
// before any item: the rule leaves room for the largest item beyond them, at
// the bounds measured against memcached 1.6.18 (-m at least the classes - 1
// plus the item's MiB; 63 classes below -f 1.25, 41 from it). The
// real-memcached tier stores such an item in every accepted spec.
func TestWarmRestartLeavesRoomForTheLargestItem(t *testing.T) {
	ns := newNamespace(t)
	for i, c := range []struct {
		memoryMB int32
		itemSize string
		args     []string
		need     int // 0: accepted
	}{
		{64, "4Mi", []string{"-f", "1.08", "-n", "48"}, 66},
		{65, "4Mi", []string{"--slab-growth-factor", "1.2"}, 66},
		{66, "4Mi", []string{"-f", "1.08"}, 0},
		{64, "4Mi", nil, 0},
		{64, "4Mi", []string{"-f", "1.25"}, 0},
		{64, "", []string{"-f", "1.08"}, 0},
		{64, "1536Ki", []string{"-f", "1.08"}, 0},
		{64, "26Mi", nil, 66},
		{66, "26Mi", []string{"-f", "2"}, 0},
	} {
		t.Run(fmt.Sprintf("-m %d -I %s %s", c.memoryMB, c.itemSize, strings.Join(c.args, " ")), func(t *testing.T) {
			g := NewWithT(t)
			mc := newMemcached(ns, fmt.Sprintf("warm-%d", i), 1, func(m *cachev1alpha1.Memcached) {
				m.Spec.Identity = cachev1alpha1.IdentityStable
				m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To(c.memoryMB), ExtraArgs: c.args, WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true}}
				if c.itemSize != "" {
					m.Spec.Memcached.MaxItemSize = ptr.To(resource.MustParse(c.itemSize))
				}
			})
			err := k8sClient.Create(testCtx, mc, client.DryRunAll)
			if c.need == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("spec.memcached.maxMemoryMB: Invalid value: spec.memcached.warmRestart needs maxMemoryMB of at least 62 + maxItemSize"))
			// The bound itself is accepted: the rule is the measured bound, not a margin.
			mc.Spec.Memcached.MaxMemoryMB = ptr.To(int32(c.need))
			g.Expect(k8sClient.Create(testCtx, mc, client.DryRunAll)).To(Succeed())
		})
	}
}

// The CRD's memory floor and MinimumMemoryMiB (the default request the
// builder sets) are one formula written twice: the floor accepts exactly
// MinimumMemoryMiB and refuses one MiB less.
func TestMemoryFloorIsMinimumMemoryMiB(t *testing.T) {
	ns := newNamespace(t)
	for _, c := range []struct{ memory, connections int32 }{{8, 36}, {64, 1024}, {100, 1000}, {1024, 65536}, {65536, 4096}} {
		floor := cachev1alpha1.MinimumMemoryMiB(c.memory, c.connections)
		t.Run(fmt.Sprintf("%dMB %d connections: %dMi", c.memory, c.connections, floor), func(t *testing.T) {
			g := NewWithT(t)
			withLimit := func(mib int64) *cachev1alpha1.Memcached {
				return newMemcached(ns, "floor", 1, func(m *cachev1alpha1.Memcached) {
					m.Spec.Memcached = &cachev1alpha1.MemcachedConfig{MaxMemoryMB: ptr.To(c.memory), MaxConnections: ptr.To(c.connections)}
					m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceMemory: *resource.NewQuantity(mib<<20, resource.BinarySI),
					}}
				})
			}
			g.Expect(k8sClient.Create(testCtx, withLimit(floor), client.DryRunAll)).To(Succeed())
			err := k8sClient.Create(testCtx, withLimit(floor-1), client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		})
	}
}
