package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// MemcachedPort is the port memcached listens on, in the pod and on the Service.
	MemcachedPort = 11211
	// ExporterPort is the port of the optional memcached_exporter sidecar.
	ExporterPort = 9150

	// MemoryOverheadMB is what memcached needs beyond its item memory (-m):
	// the hash table, connection buffers and the process itself. The CRD's
	// CEL rule and the default memory request both use it.
	MemoryOverheadMB = 32
)

// Defaults applied when the corresponding field is unset. The CRD carries
// the same values as +kubebuilder:default markers, so they show up in
// `kubectl get -o yaml`; the constants keep Go callers that build objects
// without the apiserver's defaulting in step.
const (
	DefaultSize           int32 = 1
	DefaultMaxMemoryMB    int32 = 64
	DefaultMaxConnections int32 = 1024
	DefaultThreads        int32 = 4
)

// AntiAffinity says how strongly the pods of one Memcached avoid sharing a node.
// +kubebuilder:validation:Enum=None;Soft;Hard
type AntiAffinity string

const (
	// AntiAffinityNone puts no constraint on where pods land.
	AntiAffinityNone AntiAffinity = "None"
	// AntiAffinitySoft prefers different nodes but still schedules when it cannot.
	AntiAffinitySoft AntiAffinity = "Soft"
	// AntiAffinityHard requires different nodes; extra pods stay Pending.
	AntiAffinityHard AntiAffinity = "Hard"
)

// MemcachedSpec is the desired state of a Memcached cache.
//
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || (type(self.resources.limits['memory']) == int ? double(self.resources.limits['memory']) : quantity(self.resources.limits['memory']).asApproximateFloat()) >= double((has(self.memcached) && has(self.memcached.maxMemoryMB) ? self.memcached.maxMemoryMB : 64) + 32) * 1048576.0",message="spec.resources.limits.memory must be at least spec.memcached.maxMemoryMB (default 64) + 32Mi for memcached's own overhead; raise the limit or lower maxMemoryMB",fieldPath=".resources.limits"
type MemcachedSpec struct {
	// Size is the number of memcached pods. It is the field behind the scale
	// subresource, so `kubectl scale memcached/NAME --replicas=N` sets it.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +required
	Size *int32 `json:"size,omitempty"`

	// Image is the memcached container image. When unset, the operator uses its
	// --memcached-image flag (MEMCACHED_IMAGE), so one operator upgrade moves
	// every cache that did not pin an image.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9][a-zA-Z0-9._-]*(:[0-9]+)?(/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="spec.image must be an image reference such as memcached:1.6.39-alpine or registry.example.com/cache/memcached@sha256:<64 hex digits>"
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the memcached container. When unset, the operator requests
	// maxMemoryMB + 32Mi of memory (and sets the same limit) and 100m CPU.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector constrains the memcached pods to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the memcached pods.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of the memcached pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Memcached tunes the memcached process.
	// +optional
	Memcached *MemcachedConfig `json:"memcached,omitempty"`

	// HighAvailability spreads the pods and protects them from voluntary disruption.
	// +optional
	HighAvailability *HighAvailabilitySpec `json:"highAvailability,omitempty"`

	// Monitoring adds a Prometheus exporter.
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// Paused stops the operator from changing the objects it owns. Status is
	// still reported. Deleting a paused Memcached still cleans up.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// MemcachedConfig holds the memcached command-line settings the operator manages.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxItemSize) || (type(self.maxItemSize) == int ? double(self.maxItemSize) : quantity(self.maxItemSize).asApproximateFloat()) <= double(has(self.maxMemoryMB) ? self.maxMemoryMB : 64) * 524288.0",message="spec.memcached.maxItemSize must be at most half of spec.memcached.maxMemoryMB (memcached refuses a larger -I); lower maxItemSize or raise maxMemoryMB",fieldPath=".maxItemSize"
type MemcachedConfig struct {
	// MaxMemoryMB is the item memory in megabytes (memcached -m).
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxMemoryMB *int32 `json:"maxMemoryMB,omitempty"`

	// MaxConnections is the maximum number of simultaneous connections (memcached -c).
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// Threads is the number of worker threads (memcached -t).
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MaxItemSize is the largest item memcached stores (memcached -I), as a
	// byte quantity such as 1Mi or 512Ki, between 1Ki and 1Gi.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1024 && self <= 1073741824) : (quantity(self).isInteger() && quantity(self).compareTo(quantity('1Ki')) >= 0 && quantity(self).compareTo(quantity('1Gi')) <= 0)",message="spec.memcached.maxItemSize must be a whole number of bytes between 1Ki and 1Gi, such as 1Mi or 512Ki (in Kubernetes quantities 1m means one thousandth, not a megabyte)"
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Verbosity is memcached's log level: 0 (errors), 1 (-v) or 2 (-vv).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	Verbosity int32 `json:"verbosity,omitempty"`

	// ExtraArgs are appended to the memcached command line, for flags without a
	// field here (for example ["-o", "modern"]). Flags the operator manages are
	// rejected.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^(-[pUlmctIdu]|-v+$|--(port|udp-port|listen|memory-limit|conn-limit|threads|max-item-size|daemon|user)(=|$))'))",message="spec.memcached.extraArgs must not set flags the operator manages (-p, -U, -l, -m, -c, -t, -I, -v, -d, -u); use the matching spec.memcached field instead"
	// +listType=atomic
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// HighAvailabilitySpec spreads the pods of one Memcached and protects them.
type HighAvailabilitySpec struct {
	// AntiAffinity keeps the pods of this Memcached on different nodes:
	// None, Soft (preferred, the default) or Hard (required).
	// +kubebuilder:default=Soft
	// +optional
	AntiAffinity AntiAffinity `json:"antiAffinity,omitempty"`

	// TopologySpreadConstraints of the pods. A constraint without a
	// labelSelector gets this Memcached's pod selector.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PodDisruptionBudget protects the pods from voluntary disruption
	// (drains, cluster upgrades). It is on by default when size > 1.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`
}

// PodDisruptionBudgetSpec configures the PodDisruptionBudget of a Memcached.
// Set at most one of minAvailable and maxUnavailable; with neither, the
// budget allows one pod to be unavailable at a time.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.minAvailable) && has(self.maxUnavailable))",message="spec.highAvailability.podDisruptionBudget: set either minAvailable or maxUnavailable, not both"
type PodDisruptionBudgetSpec struct {
	// Enabled turns the budget on or off. Unset means: on when size > 1.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// MinAvailable is the number or percentage of pods that must stay available.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.highAvailability.podDisruptionBudget.minAvailable must be a non-negative integer or a percentage such as 50%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// MaxUnavailable is the number or percentage of pods that may be unavailable.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]+%$')",message="spec.highAvailability.podDisruptionBudget.maxUnavailable must be a positive integer or a percentage such as 25%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// MonitoringSpec configures how the cache is observed.
type MonitoringSpec struct {
	// Exporter runs prometheus/memcached_exporter next to memcached.
	// +optional
	Exporter *ExporterSpec `json:"exporter,omitempty"`
}

// ExporterSpec configures the memcached_exporter sidecar, which serves
// Prometheus metrics on port 9150 (named "metrics" on the pod and the Service).
type ExporterSpec struct {
	// Enabled adds the sidecar.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image of the exporter. When unset, the operator's --exporter-image flag.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9][a-zA-Z0-9._-]*(:[0-9]+)?(/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="spec.monitoring.exporter.image must be an image reference such as quay.io/prometheus/memcached-exporter:v0.15.0"
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container. When unset: 10m CPU and 16Mi memory
	// requested, 32Mi memory limit.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// MemcachedStatus is the observed state of a Memcached.
type MemcachedStatus struct {
	// Conditions: Ready (the summary used by kstatus, Flux and Argo CD),
	// Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of memcached pods that exist (scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of memcached pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the pod label selector, in string form (scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`

	// Endpoint is the DNS name and port clients connect to. The Service is
	// headless, so the name resolves to every ready pod.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// Memcached runs a memcached cache: a Deployment, a headless Service and,
// when it has more than one pod, a PodDisruptionBudget.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=mc,categories=cache
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Memcached struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MemcachedSpec `json:"spec,omitempty"`

	// +optional
	Status MemcachedStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MemcachedList is a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
