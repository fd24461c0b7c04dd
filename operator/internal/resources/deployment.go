package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Options are the operator-wide defaults a Memcached may leave unset.
type Options struct {
	// MemcachedImage is used when spec.image is empty.
	MemcachedImage string
	// ExporterImage is used when spec.monitoring.exporter.image is empty.
	ExporterImage string
	// ReloaderImage runs the reloader sidecar of a Memcached with
	// spec.security: the operator's own image.
	ReloaderImage string
}

const (
	// Container and port names. Probes and the Service refer to ports by name.
	memcachedContainer = "memcached"
	exporterContainer  = "exporter"
	memcachedPortName  = "memcached"
	metricsPortName    = "metrics"

	hostnameTopologyKey = "kubernetes.io/hostname"
)

// Deployment returns the Deployment that runs the memcached pods of a
// Memcached with identity Ephemeral. Its name is the Memcached's name, as in
// the operator-sdk tutorial the API comes from.
func Deployment(m *cachev1alpha1.Memcached, opts Options) *appsv1ac.DeploymentApplyConfiguration {
	labels := Labels(m)
	return withDesiredHash(appsv1ac.Deployment(m.Name, m.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(m.GetSize()).
			WithMinReadySeconds(m.MinReadySeconds()).
			WithRevisionHistoryLimit(ptr.Deref(m.Spec.RevisionHistoryLimit, cachev1alpha1.DefaultRevisionHistoryLimit)).
			WithStrategy(rolloutStrategy(m)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			WithTemplate(podTemplate(m, opts))))
}

// podTemplate is the memcached pod of either workload kind.
func podTemplate(m *cachev1alpha1.Memcached, opts Options) *corev1ac.PodTemplateSpecApplyConfiguration {
	args := MemcachedArgs(m)
	volumes, mounts := securityVolumes(m)
	memcached := memcachedContainerSpec(m, opts, args).WithVolumeMounts(mounts...)
	if m.WarmRestart() != nil {
		memcached.WithVolumeMounts(corev1ac.VolumeMount().WithName(MemoryFileVolume).WithMountPath(MemoryFileMountPath))
	}
	pod := corev1ac.PodSpec().
		WithEnableServiceLinks(false).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(podSecurityContext(m)).
		WithVolumes(volumes...).
		WithContainers(memcached)
	if exporter := exporterContainerSpec(m, opts); exporter != nil {
		pod.WithContainers(exporter)
	}
	if reloader := reloaderContainerSpec(m, opts, mounts); reloader != nil {
		pod.WithContainers(reloader)
	}
	if grace := terminationGracePeriodSeconds(m); grace > corev1.DefaultTerminationGracePeriodSeconds {
		pod.WithTerminationGracePeriodSeconds(grace)
	}
	if authSpec(m) != nil || m.WarmRestart() != nil {
		// The reloader makes memcached reread its password file with
		// SIGHUP and save its memory file with SIGUSR1, so it must see
		// memcached's process.
		pod.WithShareProcessNamespace(true)
	}
	if m.Spec.ImagePullPolicy != "" {
		// Unset, the apiserver defaults it from the image's tag; sending an
		// empty value would make every comparison with the live object differ.
		for i := range pod.Containers {
			pod.Containers[i].WithImagePullPolicy(m.Spec.ImagePullPolicy)
		}
	}
	if affinity := affinity(m); affinity != nil {
		pod.WithAffinity(affinity)
	}
	for _, c := range topologySpreadConstraints(m) {
		pod.WithTopologySpreadConstraints(c)
	}
	if len(m.Spec.NodeSelector) > 0 {
		pod.WithNodeSelector(m.Spec.NodeSelector)
	}
	for i := range m.Spec.Tolerations {
		pod.WithTolerations(convert[corev1ac.TolerationApplyConfiguration](m.Spec.Tolerations[i]))
	}
	for _, s := range m.Spec.ImagePullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	if m.Spec.PriorityClassName != "" {
		pod.WithPriorityClassName(m.Spec.PriorityClassName)
	}
	if m.Spec.ServiceAccountName != "" {
		pod.WithServiceAccountName(m.Spec.ServiceAccountName)
	}

	template := corev1ac.PodTemplateSpec().WithSpec(pod)
	if pm := m.Spec.PodMetadata; pm != nil {
		// The user's first, so that the operator's own keys always win.
		template.WithLabels(pm.Labels).WithAnnotations(pm.Annotations)
	}
	return template.WithLabels(Labels(m)).WithAnnotations(map[string]string{ConfigHashAnnotation: ConfigHash(args)})
}

// warmStopSeconds is how long memcached gets, after the drain, to save its
// memory file on SIGUSR1 before the kubelet's SIGTERM; SIGTERM during the
// save would make it skip the save.
const warmStopSeconds = 5

// terminationGracePeriodSeconds covers the drain (the preStop sleep), the
// warm stop, and ten seconds for memcached to close its connections. It is
// written only when it exceeds the default, 30 seconds.
func terminationGracePeriodSeconds(m *cachev1alpha1.Memcached) int64 {
	return int64(preStopSeconds(m)) + 10
}

// preStopSeconds is how long the memcached container's preStop hook
// sleeps: the drain, then with warm restart the time the reloader's
// SIGUSR1 gives memcached to save its items.
func preStopSeconds(m *cachev1alpha1.Memcached) int32 {
	seconds := m.DrainSeconds()
	if m.WarmRestart() != nil {
		seconds += warmStopSeconds
	}
	return seconds
}

// rolloutStrategy replaces pods in place: a new cache pod starts empty, so a
// surge pod would buy no warm capacity, and with antiAffinity: Hard on
// exactly size nodes it could never be scheduled, so every rollout would
// stall. Instead the rollout takes down as many pods at a time as the
// PodDisruptionBudget allows to be disrupted (at least one): a rollout does
// not go through the eviction API, so the budget is honoured here.
func rolloutStrategy(m *cachev1alpha1.Memcached) *appsv1ac.DeploymentStrategyApplyConfiguration {
	return appsv1ac.DeploymentStrategy().
		WithType(appsv1.RollingUpdateDeploymentStrategyType).
		WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
			WithMaxSurge(intstr.FromInt32(0)).
			WithMaxUnavailable(intstr.FromInt32(max(1, disruptionsAllowed(m)))))
}

// disruptionsAllowed is how many of size pods the PodDisruptionBudget lets go
// at once, rounding percentages as the disruption controller does (up).
// Without a budget it is one.
func disruptionsAllowed(m *cachev1alpha1.Memcached) int32 {
	size := m.GetSize()
	var cfg cachev1alpha1.PodDisruptionBudgetSpec
	if m.Spec.HighAvailability != nil && m.Spec.HighAvailability.PodDisruptionBudget != nil {
		cfg = *m.Spec.HighAvailability.PodDisruptionBudget
	}
	if !wantPodDisruptionBudget(m, cfg) {
		return 1
	}
	switch {
	case cfg.MinAvailable != nil:
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(cfg.MinAvailable, int(size), true)
		if err != nil {
			return 1
		}
		return size - int32(minAvailable)
	case cfg.MaxUnavailable != nil:
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(cfg.MaxUnavailable, int(size), true)
		if err != nil {
			return 1
		}
		return int32(maxUnavailable)
	}
	return 1
}

// podSecurityContext meets the Pod Security "restricted" profile. With
// userID: Fixed it also names the image's memcache user; with Platform it
// leaves the uid to the platform (OpenShift assigns one per namespace).
func podSecurityContext(m *cachev1alpha1.Memcached) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if userIDPolicy(m) == cachev1alpha1.UserIDFixed {
		sc.WithRunAsUser(cachev1alpha1.MemcachedUID).WithRunAsGroup(cachev1alpha1.MemcachedUID)
		if m.Spec.Security != nil || m.WarmRestart() != nil {
			// Group-owns the mounted Secrets, so that their files can be
			// 0440, and the memory file's volume, so that memcached can
			// write it. Only set with either: a new field in every pod
			// template would roll every existing cache on upgrade.
			sc.WithFSGroup(cachev1alpha1.MemcachedUID)
		}
	}
	return sc
}

func userIDPolicy(m *cachev1alpha1.Memcached) cachev1alpha1.UserIDPolicy {
	if m.Spec.PodSecurity == nil || m.Spec.PodSecurity.UserID == "" {
		return cachev1alpha1.UserIDFixed
	}
	return m.Spec.PodSecurity.UserID
}

// MemcachedImage is the image the memcached container runs.
func MemcachedImage(m *cachev1alpha1.Memcached, opts Options) string {
	if m.Spec.Image != "" {
		return m.Spec.Image
	}
	return opts.MemcachedImage
}

// MemcachedArgs is the memcached command line. The official image's entrypoint
// runs memcached when the first argument is a flag.
func MemcachedArgs(m *cachev1alpha1.Memcached) []string {
	cfg := ptr.Deref(m.Spec.Memcached, cachev1alpha1.MemcachedConfig{})
	args := []string{
		"-p", strconv.Itoa(cachev1alpha1.MemcachedPort),
		"-m", strconv.Itoa(int(m.MaxMemoryMB())),
		"-c", strconv.Itoa(int(m.MaxConnections())),
		"-t", strconv.Itoa(int(ptr.Deref(cfg.Threads, cachev1alpha1.DefaultThreads))),
	}
	if cfg.MaxItemSize != nil {
		args = append(args, "-I", memcachedSize(cfg.MaxItemSize))
	}
	if cfg.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", int(cfg.Verbosity)))
	}
	if m.WarmRestart() != nil {
		args = append(args, "-e", MemoryFile)
	}
	args = append(args, securityArgs(m)...)
	return append(args, cfg.ExtraArgs...)
}

// ConfigHash identifies a memcached configuration. It is written to the pod
// template, so `kubectl get pods -o yaml` shows which configuration a pod
// runs and two pods can be compared without reading their arguments.
func ConfigHash(args []string) string {
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// memcachedSize prints a byte quantity in memcached's -I syntax, where the
// suffixes k and m are binary (1m = 1048576 bytes).
func memcachedSize(q *resource.Quantity) string {
	b := q.Value()
	switch {
	case b%(1<<20) == 0:
		return strconv.FormatInt(b>>20, 10) + "m"
	case b%(1<<10) == 0:
		return strconv.FormatInt(b>>10, 10) + "k"
	default:
		return strconv.FormatInt(b, 10)
	}
}

func memcachedContainerSpec(m *cachev1alpha1.Memcached, opts Options, args []string) *corev1ac.ContainerApplyConfiguration {
	port := intstr.FromString(memcachedPortName)
	c := corev1ac.Container().
		WithName(memcachedContainer).
		WithImage(MemcachedImage(m, opts)).
		WithArgs(args...).
		WithPorts(corev1ac.ContainerPort().
			WithName(memcachedPortName).
			WithContainerPort(cachev1alpha1.MemcachedPort).
			WithProtocol(corev1.ProtocolTCP))
	if t := tlsSpec(m); t != nil && t.PlaintextPort != nil {
		c.WithPorts(corev1ac.ContainerPort().
			WithName(plainPortName).
			WithContainerPort(*t.PlaintextPort).
			WithProtocol(corev1.ProtocolTCP))
	}
	// The probes open and close a TCP connection, which a TLS listener
	// accepts like any other: they need no certificate.
	//
	// A stopping pod leaves the Service's endpoints and status.serverList
	// at once, but clients notice only when they next look; the preStop
	// sleep keeps memcached serving until they have. The kubelet's own
	// sleep action needs nothing from the image.
	return c.
		WithLifecycle(corev1ac.Lifecycle().
			WithPreStop(corev1ac.LifecycleHandler().
				WithSleep(corev1ac.SleepAction().WithSeconds(int64(preStopSeconds(m)))))).
		WithResources(memcachedResources(m)).
		WithSecurityContext(restrictedContainerSecurityContext()).
		WithReadinessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(port)).
			WithPeriodSeconds(5).
			WithFailureThreshold(3)).
		WithLivenessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(port)).
			WithInitialDelaySeconds(10).
			WithPeriodSeconds(10).
			WithFailureThreshold(6))
}

// memcachedResources uses spec.resources when set. Otherwise it requests what
// memcached will use and limits memory to the same amount, so the cache never
// competes for memory it was not given.
func memcachedResources(m *cachev1alpha1.Memcached) *corev1ac.ResourceRequirementsApplyConfiguration {
	if m.Spec.Resources != nil {
		return convert[corev1ac.ResourceRequirementsApplyConfiguration](m.Spec.Resources)
	}
	memory := *resource.NewQuantity(cachev1alpha1.MinimumMemoryMiB(m.MaxMemoryMB(), m.MaxConnections())<<20, resource.BinarySI)
	return corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: memory,
		}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: memory})
}

func exporterContainerSpec(m *cachev1alpha1.Memcached, opts Options) *corev1ac.ContainerApplyConfiguration {
	exporter := exporterSpec(m)
	if exporter == nil {
		return nil
	}
	image := exporter.Image
	if image == "" {
		image = opts.ExporterImage
	}
	resources := corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("16Mi"),
		}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")})
	if exporter.Resources != nil {
		resources = convert[corev1ac.ResourceRequirementsApplyConfiguration](exporter.Resources)
	}
	// With TLS on, the exporter scrapes the pod's loopback listener: it
	// needs no client certificate, and its traffic never leaves the pod.
	// With auth on, it scrapes through the reloader, which authenticates
	// for it (memcached_exporter cannot).
	address := "localhost:" + strconv.Itoa(cachev1alpha1.MemcachedPort)
	switch {
	case authSpec(m) != nil:
		address = "127.0.0.1:" + strconv.Itoa(cachev1alpha1.ExporterAuthPort)
	case tlsSpec(m) != nil:
		address = "127.0.0.1:" + strconv.Itoa(cachev1alpha1.LoopbackPort)
	}
	return corev1ac.Container().
		WithName(exporterContainer).
		WithImage(image).
		WithArgs(
			"--memcached.address="+address,
			"--web.listen-address=:"+strconv.Itoa(cachev1alpha1.ExporterPort),
		).
		WithPorts(corev1ac.ContainerPort().
			WithName(metricsPortName).
			WithContainerPort(cachev1alpha1.ExporterPort).
			WithProtocol(corev1.ProtocolTCP)).
		WithResources(resources).
		WithSecurityContext(restrictedContainerSecurityContext())
}

// exporterSpec returns the exporter settings when the sidecar is enabled.
func exporterSpec(m *cachev1alpha1.Memcached) *cachev1alpha1.ExporterSpec {
	if m.Spec.Monitoring == nil || m.Spec.Monitoring.Exporter == nil || !m.Spec.Monitoring.Exporter.Enabled {
		return nil
	}
	return m.Spec.Monitoring.Exporter
}

// restrictedContainerSecurityContext satisfies the Pod Security "restricted"
// profile together with the pod-level settings.
func restrictedContainerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
}

func antiAffinityMode(m *cachev1alpha1.Memcached) cachev1alpha1.AntiAffinity {
	if m.Spec.HighAvailability == nil || m.Spec.HighAvailability.AntiAffinity == "" {
		return cachev1alpha1.AntiAffinitySoft
	}
	return m.Spec.HighAvailability.AntiAffinity
}

// affinity is the user's spec.affinity with the anti-affinity term that
// spec.highAvailability.antiAffinity asks for added to it. The term keeps
// this Memcached's pods on different nodes, so losing a node loses one shard
// of the cache, not all of it.
func affinity(m *cachev1alpha1.Memcached) *corev1ac.AffinityApplyConfiguration {
	var out *corev1ac.AffinityApplyConfiguration
	if m.Spec.Affinity != nil {
		out = convert[corev1ac.AffinityApplyConfiguration](m.Spec.Affinity)
	}
	term := corev1ac.PodAffinityTerm().
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
		WithTopologyKey(hostnameTopologyKey)
	mode := antiAffinityMode(m)
	if mode == cachev1alpha1.AntiAffinityNone {
		return out
	}
	if out == nil {
		out = corev1ac.Affinity()
	}
	if out.PodAntiAffinity == nil {
		out.WithPodAntiAffinity(corev1ac.PodAntiAffinity())
	}
	if mode == cachev1alpha1.AntiAffinityHard {
		out.PodAntiAffinity.WithRequiredDuringSchedulingIgnoredDuringExecution(term)
	} else {
		out.PodAntiAffinity.WithPreferredDuringSchedulingIgnoredDuringExecution(
			corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(term))
	}
	return out
}

// topologySpreadConstraints copies the user's constraints and gives the ones
// without a labelSelector this Memcached's selector, which is what a user
// means by "spread my cache".
func topologySpreadConstraints(m *cachev1alpha1.Memcached) []*corev1ac.TopologySpreadConstraintApplyConfiguration {
	if m.Spec.HighAvailability == nil {
		return nil
	}
	out := make([]*corev1ac.TopologySpreadConstraintApplyConfiguration, 0, len(m.Spec.HighAvailability.TopologySpreadConstraints))
	for i := range m.Spec.HighAvailability.TopologySpreadConstraints {
		c := convert[corev1ac.TopologySpreadConstraintApplyConfiguration](m.Spec.HighAvailability.TopologySpreadConstraints[i])
		if c.LabelSelector == nil {
			c.WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m)))
		}
		out = append(out, c)
	}
	return out
}
