package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

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
}

const (
	// Container and port names. Probes and the Service refer to ports by name.
	memcachedContainer = "memcached"
	exporterContainer  = "exporter"
	memcachedPortName  = "memcached"
	metricsPortName    = "metrics"

	// memcachedUID is the memcache user of the official image (Debian and
	// Alpine variants alike), so the pod can run as non-root without
	// depending on the image's USER line.
	memcachedUID = 11211

	hostnameTopologyKey = "kubernetes.io/hostname"
)

// Deployment returns the Deployment that runs the memcached pods. Its name is
// the Memcached's name, as in the operator-sdk tutorial the API comes from.
func Deployment(m *cachev1alpha1.Memcached, opts Options) *appsv1ac.DeploymentApplyConfiguration {
	labels := Labels(m)
	args := MemcachedArgs(m)

	pod := corev1ac.PodSpec().
		WithEnableServiceLinks(false).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(memcachedUID).
			WithRunAsGroup(memcachedUID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(memcachedContainerSpec(m, opts, args))
	if exporter := exporterContainerSpec(m, opts); exporter != nil {
		pod.WithContainers(exporter)
	}
	if affinity := podAntiAffinity(m); affinity != nil {
		pod.WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(affinity))
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
	if m.Spec.PriorityClassName != "" {
		pod.WithPriorityClassName(m.Spec.PriorityClassName)
	}

	return withDesiredHash(appsv1ac.Deployment(m.Name, m.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(m.GetSize()).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithAnnotations(map[string]string{ConfigHashAnnotation: ConfigHash(args)}).
				WithSpec(pod))))
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
		"-m", strconv.Itoa(int(maxMemoryMB(m))),
		"-c", strconv.Itoa(int(ptr.Deref(cfg.MaxConnections, cachev1alpha1.DefaultMaxConnections))),
		"-t", strconv.Itoa(int(ptr.Deref(cfg.Threads, cachev1alpha1.DefaultThreads))),
	}
	if cfg.MaxItemSize != nil {
		args = append(args, "-I", memcachedSize(cfg.MaxItemSize))
	}
	if cfg.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", int(cfg.Verbosity)))
	}
	return append(args, cfg.ExtraArgs...)
}

// ConfigHash identifies a memcached configuration. It is written to the pod
// template, so `kubectl get pods -o yaml` shows which configuration a pod
// runs and two pods can be compared without reading their arguments.
func ConfigHash(args []string) string {
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return hex.EncodeToString(sum[:8])
}

func maxMemoryMB(m *cachev1alpha1.Memcached) int32 {
	if m.Spec.Memcached == nil {
		return cachev1alpha1.DefaultMaxMemoryMB
	}
	return ptr.Deref(m.Spec.Memcached.MaxMemoryMB, cachev1alpha1.DefaultMaxMemoryMB)
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
	return corev1ac.Container().
		WithName(memcachedContainer).
		WithImage(MemcachedImage(m, opts)).
		WithArgs(args...).
		WithPorts(corev1ac.ContainerPort().
			WithName(memcachedPortName).
			WithContainerPort(cachev1alpha1.MemcachedPort).
			WithProtocol(corev1.ProtocolTCP)).
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
	memory := *resource.NewQuantity(int64(maxMemoryMB(m)+cachev1alpha1.MemoryOverheadMB)<<20, resource.BinarySI)
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
	return corev1ac.Container().
		WithName(exporterContainer).
		WithImage(image).
		WithArgs(
			"--memcached.address=localhost:"+strconv.Itoa(cachev1alpha1.MemcachedPort),
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

// podAntiAffinity keeps this Memcached's pods on different nodes, so losing a
// node loses one shard of the cache, not all of it.
func podAntiAffinity(m *cachev1alpha1.Memcached) *corev1ac.PodAntiAffinityApplyConfiguration {
	term := corev1ac.PodAffinityTerm().
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
		WithTopologyKey(hostnameTopologyKey)
	switch antiAffinityMode(m) {
	case cachev1alpha1.AntiAffinityHard:
		return corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term)
	case cachev1alpha1.AntiAffinitySoft:
		return corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
			corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(term))
	default:
		return nil
	}
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
