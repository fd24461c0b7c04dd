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
	// LoopbackPort is the plaintext listener on 127.0.0.1 that memcached
	// opens when TLS is on. Only containers of the same pod reach it: the
	// exporter scrapes through it and the reloader sends refresh_certs on it,
	// so neither needs a client certificate.
	LoopbackPort = 11210
	// ExporterAuthPort is where the reloader, in a pod with
	// spec.security.auth and the exporter, listens on 127.0.0.1 for the
	// exporter: it authenticates each connection to memcached with the
	// password file's first entry, because memcached_exporter cannot.
	ExporterAuthPort = 11209

	// MemcachedUID is the uid and gid of the memcache user in the official
	// image (Debian and Alpine variants alike). With userID: Fixed the pods
	// run as this user, so they need no USER line in the image.
	MemcachedUID = 11211
)

// Defaults applied when the corresponding field is unset. The CRD carries
// the same values as +kubebuilder:default markers, so they show up in
// `kubectl get -o yaml`; the constants keep Go callers that build objects
// without the apiserver's defaulting in step.
const (
	DefaultSize                 int32 = 1
	DefaultMaxMemoryMB          int32 = 64
	DefaultMaxConnections       int32 = 1024
	DefaultThreads              int32 = 4
	DefaultRevisionHistoryLimit int32 = 10
	DefaultMinReadySeconds      int32 = 10
	DefaultDrainSeconds         int32 = 5
)

// MaxStableNameLength is the longest name of a Memcached with identity
// Stable: its StatefulSet's pods carry the label controller-revision-hash,
// NAME-<10 characters>, and a label value is at most 63 characters.
const MaxStableNameLength = 52

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

// Identity says whether a Memcached's pods keep their names and addresses.
// +kubebuilder:validation:Enum=Ephemeral;Stable
type Identity string

const (
	// IdentityEphemeral runs the pods as a Deployment: a replaced pod comes
	// back under a new name and address.
	IdentityEphemeral Identity = "Ephemeral"
	// IdentityStable runs the pods as a StatefulSet behind the headless
	// Service: pod i is always NAME-i and resolves as NAME-i.NAME.NAMESPACE.svc.
	IdentityStable Identity = "Stable"
)

// UserIDPolicy says who chooses the uid the memcached pods run as.
// +kubebuilder:validation:Enum=Fixed;Platform
type UserIDPolicy string

const (
	// UserIDFixed runs memcached as uid and gid 11211, the memcache user of
	// the official image.
	UserIDFixed UserIDPolicy = "Fixed"
	// UserIDPlatform sets no uid or gid, for platforms that assign one per
	// namespace (OpenShift's restricted-v2 SCC rejects a fixed uid outside the
	// namespace's range). The pods still must run as non-root.
	UserIDPlatform UserIDPolicy = "Platform"
)

// MemcachedSpec is the desired state of a Memcached cache.
//
// The memory floor below is MinimumMemoryMiB written in CEL; a unit test keeps the two equal.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || (type(self.resources.limits['memory']) == int ? double(self.resources.limits['memory']) : quantity(self.resources.limits['memory']).asApproximateFloat()) >= double((has(self.memcached) && has(self.memcached.maxMemoryMB) ? self.memcached.maxMemoryMB : 64) + 16 + ((has(self.memcached) && has(self.memcached.maxMemoryMB) ? self.memcached.maxMemoryMB : 64) + 7) / 8 + ((has(self.memcached) && has(self.memcached.maxConnections) ? self.memcached.maxConnections : 1024) + 63) / 64) * 1048576.0",message="spec.resources.limits.memory must be at least maxMemoryMB + 16Mi + maxMemoryMB/8 (hash table) + maxConnections x 16Ki (connection buffers); with the defaults (64, 1024) that is 104Mi. Raise the limit, or lower spec.memcached.maxMemoryMB or maxConnections",fieldPath=".resources.limits"
// +kubebuilder:validation:XValidation:rule="(has(self.identity) ? self.identity : 'Ephemeral') == (has(oldSelf.identity) ? oldSelf.identity : 'Ephemeral')",message="spec.identity cannot change: an Ephemeral cache runs as a Deployment and a Stable one as a StatefulSet, and neither's pods can become the other's. Create a new Memcached with the identity you want, point clients at its status.serverList, then delete this one",fieldPath=".identity"
// +kubebuilder:validation:XValidation:rule="!has(self.memcached) || !has(self.memcached.warmRestart) || !self.memcached.warmRestart.enabled || (has(self.identity) && self.identity == 'Stable')",message="spec.memcached.warmRestart needs spec.identity: Stable: the memory file is kept on a volume of each pod's own, which only a stable pod finds again after it is replaced",fieldPath=".memcached.warmRestart"
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

	// ImagePullPolicy of the memcached (and exporter) containers. When unset,
	// Kubernetes decides: Always for :latest or untagged images, else IfNotPresent.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets name Secrets in the Memcached's namespace that hold
	// credentials for a private registry.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources of the memcached container. When unset, the operator requests
	// (and limits memory to) MinimumMemoryMiB: maxMemoryMB plus memcached's
	// own overhead, and 100m CPU.
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.contains('/'))",message="spec.resources.requests may name cpu, memory, ephemeral-storage or an extended resource (domain/name)",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.contains('/'))",message="spec.resources.limits may name cpu, memory, ephemeral-storage or an extended resource (domain/name)",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || (type(self.requests[r]) == int ? double(self.requests[r]) : quantity(self.requests[r]).asApproximateFloat()) <= (type(self.limits[r]) == int ? double(self.limits[r]) : quantity(self.limits[r]).asApproximateFloat()))",message="spec.resources: each request must be at most its limit"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="spec.resources.claims is not supported: memcached uses no dynamically allocated devices"
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector constrains the memcached pods to nodes with these labels.
	// Keys and values are label keys and values; the apiserver checks them
	// when the operator applies the Deployment (Stalled, reason Invalid, if
	// it refuses).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity of the memcached pods: node affinity and pod (anti-)affinity
	// terms of your own. The anti-affinity that
	// spec.highAvailability.antiAffinity asks for is added to yours.
	// The apiserver validates the terms when the operator applies the
	// Deployment; a rejected term is reported as Stalled with its message.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Tolerations of the memcached pods. Keys and values are label keys and
	// values; the apiserver checks their syntax when the operator applies the
	// Deployment (Stalled, reason Invalid, if it refuses).
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="spec.tolerations[].operator must be Exists or Equal"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="spec.tolerations[]: a toleration with operator Exists must not have a value"
	// +kubebuilder:validation:XValidation:rule="self.all(t, (has(t.key) && t.key != '') || (has(t.operator) && t.operator == 'Exists'))",message="spec.tolerations[]: a toleration without a key must use operator Exists (it tolerates every taint)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="spec.tolerations[].effect must be NoSchedule, PreferNoSchedule or NoExecute (or empty for all)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",message="spec.tolerations[].tolerationSeconds applies only to effect NoExecute"
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of the memcached pods. The PriorityClass must exist
	// when the pods are created.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.priorityClassName must be the name of a PriorityClass: lowercase letters, digits, '-' and '.'"
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ServiceAccountName the memcached pods run as. When unset, the
	// namespace's default ServiceAccount. The pods never mount its token.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.serviceAccountName must be the name of a ServiceAccount: lowercase letters, digits, '-' and '.'"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// PodMetadata adds labels and annotations to the memcached pods, for
	// example for a service mesh or a cost-allocation tool.
	// +optional
	PodMetadata *PodMetadata `json:"podMetadata,omitempty"`

	// PodSecurity chooses how the pods' identity is set.
	// +optional
	PodSecurity *PodSecuritySpec `json:"podSecurity,omitempty"`

	// RevisionHistoryLimit is the number of old ReplicaSets the Deployment
	// keeps for rollbacks.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// Memcached tunes the memcached process.
	// +optional
	Memcached *MemcachedConfig `json:"memcached,omitempty"`

	// Identity says whether the pods keep their names and addresses.
	// Ephemeral (the default, and what every Memcached created before this
	// field ran): a Deployment, whose replaced pods come back under new
	// names and addresses. Stable: a StatefulSet whose pod i is always
	// NAME-i, resolving as NAME-i.NAME.NAMESPACE.svc; status.serverList then
	// lists those names, so a client's hash ring keeps its shape when a pod
	// is replaced, and scaling down removes the highest ordinals first.
	// It cannot change once the Memcached exists, and a Stable Memcached's
	// name is at most 52 characters.
	// +kubebuilder:default=Ephemeral
	// +optional
	Identity Identity `json:"identity,omitempty"`

	// HighAvailability spreads the pods and protects them from voluntary disruption.
	// +optional
	HighAvailability *HighAvailabilitySpec `json:"highAvailability,omitempty"`

	// Monitoring adds a Prometheus exporter.
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// Security encrypts and authenticates the cache's traffic: TLS with
	// optional client certificates, and memcached's ASCII authentication.
	// A secured cache also refuses the commands that reveal keys to anyone
	// who connects (stats cachedump, lru_crawler metadump, watch) and, unless
	// allowFlushAll is set, flush_all.
	// +optional
	Security *SecuritySpec `json:"security,omitempty"`

	// Paused stops the operator from changing the objects it owns. Status is
	// still reported. Deleting a paused Memcached still cleans up.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// PodMetadata is added to the pod template. The operator's own labels
// (app.kubernetes.io/name, instance and managed-by) select the pods, so they
// cannot be set here.
type PodMetadata struct {
	// Labels added to the memcached pods.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by']))",message="spec.podMetadata.labels must not set app.kubernetes.io/name, instance or managed-by: the operator selects its pods with them"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the memcached pods.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('cache.example.com/'))",message="spec.podMetadata.annotations must not use the cache.example.com/ prefix: the operator owns it"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodSecuritySpec chooses how the memcached pods' identity is set. The pods
// always meet the Pod Security "restricted" profile.
type PodSecuritySpec struct {
	// UserID: Fixed (the default) runs memcached as uid and gid 11211, the
	// memcache user of the official image. Platform sets none, for platforms
	// that assign a uid per namespace, such as OpenShift's restricted-v2.
	// +kubebuilder:default=Fixed
	// +optional
	UserID UserIDPolicy `json:"userID,omitempty"`
}

// MemcachedConfig holds the memcached command-line settings the operator manages.
//
// memcached reserves 5 connections for each worker thread and exits at
// start when -c leaves too few ("Maxconns setting is too low"); the second
// rule keeps room for 16 clients.
//
// With a memory file (warm restart) memcached gives every slab class its
// first 1 MiB page at start, so the largest item needs pages beyond them:
// measured with memcached 1.6.18, -m must be at least (classes - 1) + the
// item's MiB, where classes is 63 below -f 1.25 and 41 from it.
// +kubebuilder:validation:XValidation:rule="(has(self.maxConnections) ? self.maxConnections : 1024) >= 5 * (has(self.threads) ? self.threads : 4) + 16",message="spec.memcached.maxConnections must be at least 5 x threads + 16 (36 with the default 4 threads): memcached reserves 5 connections per worker thread and refuses to start without room for clients; raise maxConnections or lower threads",fieldPath=".maxConnections"
// +kubebuilder:validation:XValidation:rule="!has(self.maxItemSize) || (type(self.maxItemSize) == int ? double(self.maxItemSize) : quantity(self.maxItemSize).asApproximateFloat()) <= double(has(self.maxMemoryMB) ? self.maxMemoryMB : 64) * 524288.0",message="spec.memcached.maxItemSize must be at most half of spec.memcached.maxMemoryMB (memcached refuses a larger -I); lower maxItemSize or raise maxMemoryMB",fieldPath=".maxItemSize"
// +kubebuilder:validation:XValidation:rule="!has(self.warmRestart) || !self.warmRestart.enabled || (has(self.maxMemoryMB) ? self.maxMemoryMB : 64) >= 64",message="spec.memcached.warmRestart needs maxMemoryMB of at least 64: with a memory file memcached preallocates a 1 MiB page for each slab class, and there can be 63 of them",fieldPath=".maxMemoryMB"
// +kubebuilder:validation:XValidation:rule="!has(self.warmRestart) || !self.warmRestart.enabled || (has(self.maxMemoryMB) ? self.maxMemoryMB : 64) >= ((has(self.extraArgs) && self.extraArgs.exists(i, a, i > 0 && self.extraArgs[i-1] in ['-f', '--slab-growth-factor'] && a.matches('^[0-9]{1,3}([.][0-9]{1,6})?$') && double(a) < 1.25)) ? 62 : 40) + (!has(self.maxItemSize) ? 1 : type(self.maxItemSize) == int ? (int(self.maxItemSize) + 1048575) / 1048576 : isQuantity(string(self.maxItemSize)) && quantity(string(self.maxItemSize)).isInteger() ? (quantity(string(self.maxItemSize)).asInteger() + 1048575) / 1048576 : 1)",message="spec.memcached.warmRestart needs maxMemoryMB of at least 62 + maxItemSize in MiB (rounded up) with a slab growth factor -f below 1.25, and 40 + maxItemSize in MiB from -f 1.25 (the default): with a memory file memcached gives each slab class a 1 MiB page before any item (up to 63 classes below -f 1.25, 41 from it), and the largest item needs pages beyond them; raise maxMemoryMB, lower maxItemSize or raise -f",fieldPath=".maxMemoryMB"
type MemcachedConfig struct {
	// MaxMemoryMB is the item memory in megabytes (memcached -m).
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxMemoryMB *int32 `json:"maxMemoryMB,omitempty"`

	// MaxConnections is the maximum number of simultaneous connections
	// (memcached -c). memcached sets its open-file limit to this number, so
	// the container runtime's hard RLIMIT_NOFILE must allow it (containerd's
	// and CRI-O's defaults do).
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
	// byte quantity: 512Ki, 1Mi (memcached's default) or a multiple of
	// 512Ki up to 1Gi. memcached splits items into 512KiB slab chunks and
	// refuses any other size.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 524288 && self <= 1073741824 && self % 524288 == 0) : (quantity(self).isInteger() && quantity(self).compareTo(quantity('512Ki')) >= 0 && quantity(self).compareTo(quantity('1Gi')) <= 0 && quantity(self).asInteger() % 524288 == 0)",message="spec.memcached.maxItemSize must be a multiple of 512Ki between 512Ki and 1Gi, such as 512Ki, 1Mi or 1536Ki: memcached splits items into 512KiB slab chunks and exits on any other size (and in Kubernetes quantities 1m means one thousandth, not a megabyte)"
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Verbosity is memcached's log level: 0 (errors), 1 (-v) or 2 (-vv).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	Verbosity int32 `json:"verbosity,omitempty"`

	// WarmRestart keeps the cache's items when a pod stops and starts
	// again, replaced by a rollout or a drain: memcached keeps its item
	// memory in a file (-e) on a volume of each pod's own, saves it on a
	// graceful stop (SIGUSR1) and reads it back on start. Needs identity:
	// Stable.
	// +optional
	WarmRestart *WarmRestartSpec `json:"warmRestart,omitempty"`

	// ExtraArgs are appended to the memcached command line, for tuning
	// options without a field here, for example ["-o", "modern"]. Each option
	// and each value is its own item, options spelled as in
	// `memcached --help`: -A -M -k -r -C -F -X -W, and with a value -a -f -n
	// -D -R -b and -o (with the suboptions of the tuning set: see the
	// README), or their long forms. Options the operator manages (-p -U -l
	// -m -c -t -I -v -u -B), options that make memcached exit, daemonize or
	// need files (-d -h -i -V -s -L -S -Z -P -e -Y -N) and the slab chunk
	// suboptions that maxItemSize depends on are rejected, however they are
	// spelled.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(i, a, (i > 0 && self[i-1].matches('^(-[afnDRbo]|--(unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$')) || a.matches('^(-[AMkrCFXWafnDRbo]|--(enable-shutdown|disable-evictions|lock-memory|enable-coredumps|disable-cas|disable-flush-all|disable-dumping|disable-watch|unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$'))",messageExpression="'spec.memcached.extraArgs: ' + self.transformList(i, a, !((i > 0 && self[i-1].matches('^(-[afnDRbo]|--(unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$')) || a.matches('^(-[AMkrCFXWafnDRbo]|--(enable-shutdown|disable-evictions|lock-memory|enable-coredumps|disable-cas|disable-flush-all|disable-dumping|disable-watch|unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$')), a)[0] + (self.transformList(i, a, !((i > 0 && self[i-1].matches('^(-[afnDRbo]|--(unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$')) || a.matches('^(-[AMkrCFXWafnDRbo]|--(enable-shutdown|disable-evictions|lock-memory|enable-coredumps|disable-cas|disable-flush-all|disable-dumping|disable-watch|unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$')), a)[0].matches('^(-[AMkrCFXW]*[pUlmctIvuB]|--(p|po|por|port|u|ud|udp|udp-|udp-p|udp-po|udp-por|udp-port|l|li|lis|list|liste|listen|m|me|mem|memo|memor|memory|memory-|memory-l|memory-li|memory-lim|memory-limi|memory-limit|c|co|con|conn|conn-|conn-l|conn-li|conn-lim|conn-limi|conn-limit|t|th|thr|thre|threa|thread|threads|ma|max|max-|max-i|max-it|max-ite|max-item|max-item-|max-item-s|max-item-si|max-item-siz|max-item-size|v|ve|ver|verb|verbo|verbos|verbose|us|use|user|pr|pro|prot|proto|protoc|protoco|protocol)(=.*)?$)') ? ' sets an option the operator manages, however it is spelled: use spec.memcached (maxMemoryMB, maxConnections, threads, maxItemSize, verbosity) instead' : ' is not accepted: give each option and each value as its own item, options spelled in full from -A -M -k -r -C -F -X -W -a -f -n -D -R -b -o (or their long forms), with no clustering like -Mm; options that make memcached exit, daemonize or read files are not allowed')"
	// +kubebuilder:validation:XValidation:rule="self.all(i, a, i == 0 || !self[i-1].matches('^(-[afnDRbo]|--(unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$') || !a.startsWith('-')) && (size(self) == 0 || !self[size(self)-1].matches('^(-[afnDRbo]|--(unix-mask|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|extended))$'))",message="spec.memcached.extraArgs: an option that takes a value (-a -f -n -D -R -b -o) must be followed by its value as the next item, and the value must not start with '-'"
	// +kubebuilder:validation:XValidation:rule="self.all(i, a, i == 0 || !(self[i-1] in ['-o', '--extended']) || a.split(',').all(s, s.matches('^(modern|lru_crawler|no_lru_crawler|lru_maintainer|no_lru_maintainer|slab_reassign|no_slab_reassign|no_slab_automove|maxconns_fast|no_maxconns_fast|track_sizes|slab_automove(=[0-2])?|slab_automove_ratio=(0?[.][0-9]*[1-9][0-9]*|1([.]0*)?)|slab_automove_window=([3-9]|[1-9][0-9]{1,5})|tail_repair_time=[1-9][0-9]{1,6}|hash_algorithm=(jenkins|murmur3|xxh3)|lru_crawler_sleep=([0-9]{1,6}|1000000)|lru_crawler_tocrawl=[0-9]{1,9}|hot_lru_pct=([1-9]|[1-3][0-9]|40)|warm_lru_pct=([1-9]|[1-3][0-9]|40)|hot_max_factor=[0-9]{0,3}[.]?[0-9]*[1-9][0-9]*|warm_max_factor=[0-9]{0,3}[.]?[0-9]*[1-9][0-9]*|idle_timeout=[0-9]{1,9}|read_buf_mem_limit=[0-9]{1,6})$')))",message="spec.memcached.extraArgs: -o takes a comma-separated list of these tuning suboptions: modern, lru_crawler, no_lru_crawler, lru_maintainer, no_lru_maintainer, slab_reassign, no_slab_reassign, slab_automove[=0-2], no_slab_automove, slab_automove_ratio=(0,1], slab_automove_window=>=3, tail_repair_time=>=10, hash_algorithm=jenkins|murmur3|xxh3, lru_crawler_sleep=0-1000000, lru_crawler_tocrawl=N, hot_lru_pct=1-40, warm_lru_pct=1-40, hot_max_factor=>0, warm_max_factor=>0, idle_timeout=N, read_buf_mem_limit=N, maxconns_fast, no_maxconns_fast, track_sizes. Slab chunk sizing (slab_chunk_max, slab_sizes, no_chunked_items, no_modern), hashpower, TLS and proxy suboptions are not accepted"
	// +kubebuilder:validation:XValidation:rule="self.all(i, a, i == 0 || (!(self[i-1] in ['-a', '--unix-mask']) || a.matches('^[0-7]{1,4}$')) && (!(self[i-1] in ['-f', '--slab-growth-factor']) || (a.matches('^[0-9]{1,3}([.][0-9]{1,6})?$') && double(a) > 1.0)) && (!(self[i-1] in ['-n', '--slab-min-size', '-R', '--max-reqs-per-event']) || a.matches('^[1-9][0-9]{0,4}$')) && (!(self[i-1] in ['-b', '--listen-backlog']) || a.matches('^[0-9]{1,5}$')) && (!(self[i-1] == '-D') || size(a) == 1))",message="spec.memcached.extraArgs: -a takes an octal mask such as 0700; -f a growth factor above 1 such as 1.25; -n, -R a whole number from 1 to 99999; -b a whole number up to 99999; -D a single delimiter character"
	// +listType=atomic
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// WarmRestartSpec keeps memcached's item memory in a file on a
// PersistentVolumeClaim of each pod's own.
type WarmRestartSpec struct {
	// Enabled turns warm restarts on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// StorageClassName is the class of each pod's claim for the memory file:
	// maxMemoryMB plus 1Mi. memcached maps the file as its item memory, so
	// the class must give RAM-backed volumes (local volumes on a tmpfs, or a
	// DAX filesystem); on a disk every write to an item becomes disk I/O.
	// Unset: the cluster's default class.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.memcached.warmRestart.storageClassName must be the name of a StorageClass: lowercase letters, digits, '-' and '.'"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// HighAvailabilitySpec spreads the pods of one Memcached and protects them.
type HighAvailabilitySpec struct {
	// MinReadySeconds is how long a new pod must stay ready before a
	// rollout stops the next one. Clients that refresh their server list
	// get that long to find the new pod and start filling it. At most 300:
	// a Deployment's minReadySeconds must stay below its progress deadline
	// (600 seconds).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// DrainSeconds is how long a stopping pod keeps serving after it has
	// left the Service's endpoints and status.serverList, before memcached
	// is stopped: the time clients take to stop sending it requests. The
	// pods' termination grace period covers it.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// AntiAffinity keeps the pods of this Memcached on different nodes:
	// None, Soft (preferred, the default) or Hard (required).
	// +kubebuilder:default=Soft
	// +optional
	AntiAffinity AntiAffinity `json:"antiAffinity,omitempty"`

	// TopologySpreadConstraints of the pods. A constraint without a
	// labelSelector gets this Memcached's pod selector.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1)",message="spec.highAvailability.topologySpreadConstraints[].maxSkew must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="spec.highAvailability.topologySpreadConstraints[].whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.minDomains) || (c.minDomains >= 1 && c.whenUnsatisfiable == 'DoNotSchedule'))",message="spec.highAvailability.topologySpreadConstraints[].minDomains must be at least 1 and needs whenUnsatisfiable: DoNotSchedule"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.nodeAffinityPolicy) || c.nodeAffinityPolicy in ['Honor', 'Ignore']) && self.all(c, !has(c.nodeTaintsPolicy) || c.nodeTaintsPolicy in ['Honor', 'Ignore'])",message="spec.highAvailability.topologySpreadConstraints[]: nodeAffinityPolicy and nodeTaintsPolicy must be Honor or Ignore"
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
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9][a-zA-Z0-9._-]*(:[0-9]+)?(/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="spec.monitoring.exporter.image must be an image reference such as quay.io/prometheus/memcached-exporter:v0.14.4"
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container. When unset: 10m CPU and 16Mi memory
	// requested, 32Mi memory limit.
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.contains('/'))",message="spec.monitoring.exporter.resources.requests may name cpu, memory, ephemeral-storage or an extended resource (domain/name)",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.contains('/'))",message="spec.monitoring.exporter.resources.limits may name cpu, memory, ephemeral-storage or an extended resource (domain/name)",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || (type(self.requests[r]) == int ? double(self.requests[r]) : quantity(self.requests[r]).asApproximateFloat()) <= (type(self.limits[r]) == int ? double(self.limits[r]) : quantity(self.limits[r]).asApproximateFloat()))",message="spec.monitoring.exporter.resources: each request must be at most its limit"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="spec.monitoring.exporter.resources.claims is not supported"
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ClientCertificateMode says whether memcached asks TLS clients for a
// certificate (memcached's ssl_verify_mode).
// +kubebuilder:validation:Enum=None;Request;Require
type ClientCertificateMode string

const (
	// ClientCertificatesNone asks for no client certificate (ssl_verify_mode=0).
	ClientCertificatesNone ClientCertificateMode = "None"
	// ClientCertificatesRequest asks for one and checks it against ca.crt
	// when given, but lets clients without one in (ssl_verify_mode=1).
	ClientCertificatesRequest ClientCertificateMode = "Request"
	// ClientCertificatesRequire refuses clients without a certificate signed
	// by ca.crt (ssl_verify_mode=2).
	ClientCertificatesRequire ClientCertificateMode = "Require"
)

// TLSVersion is a TLS protocol version.
// +kubebuilder:validation:Enum="1.2";"1.3"
type TLSVersion string

// The TLS versions spec.security.tls.minVersion accepts.
const (
	TLSVersion12 TLSVersion = "1.2"
	TLSVersion13 TLSVersion = "1.3"
)

// Keys of the Secrets a secured Memcached reads. The TLS keys are those of
// a kubernetes.io/tls Secret, as cert-manager writes them.
const (
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
	TLSCAKey   = "ca.crt"
	// AuthFileKey holds memcached's ASCII authentication file: one
	// user:password per line. Several lines let a password be rotated
	// without a moment in which either the old or the new one is refused.
	AuthFileKey = "auth-file"
)

// SecuritySpec makes a Memcached private. The Secrets it names are read by
// the operator (to check them and report the certificate) and mounted into
// the pods; a change to them is loaded by the pods' reloader without a
// restart, so rotating a certificate or a password keeps the cache's keys.
//
// +kubebuilder:validation:XValidation:rule="has(self.tls) || has(self.auth)",message="spec.security must set tls, auth or both"
type SecuritySpec struct {
	// TLS serves memcached over TLS only, with the certificate of a Secret.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth turns on memcached's ASCII authentication (-Y): every connection
	// must first send `set <any key> 0 0 <n>` with "user password" as the
	// value. It also limits memcached to the ASCII protocol (-B ascii).
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// AllowFlushAll keeps the flush_all command, which empties every server
	// of the cache at once. A secured cache disables it (-F) by default.
	// +optional
	AllowFlushAll bool `json:"allowFlushAll,omitempty"`
}

// TLSSpec configures memcached's TLS listener.
//
// +kubebuilder:validation:XValidation:rule="!has(self.plaintextPort) || !(self.plaintextPort in [11211, 11210, 11209, 9150])",message="spec.security.tls.plaintextPort must differ from 11211 (the TLS port), 11210 (the pod's loopback listener), 11209 (the exporter's authenticating proxy) and 9150 (the exporter); 11212 is a common choice",fieldPath=".plaintextPort"
type TLSSpec struct {
	// SecretName is a Secret in the Memcached's namespace with tls.crt (the
	// server certificate, then any intermediates), tls.key (its private key)
	// and, for client certificates, ca.crt (the CA they must be signed by):
	// what cert-manager writes for a Certificate. The pods mount it; the
	// operator checks it and reports the certificate in status.tls.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.security.tls.secretName must be the name of a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`

	// ClientCertificates: None (the default) asks clients for no
	// certificate; Request checks one against ca.crt if the client sends
	// it; Require refuses clients without a certificate signed by ca.crt.
	// Request and Require need ca.crt in the Secret.
	// +kubebuilder:default=None
	// +optional
	ClientCertificates ClientCertificateMode `json:"clientCertificates,omitempty"`

	// MinVersion is the oldest TLS version memcached accepts: 1.2 (the
	// default) or 1.3.
	// +kubebuilder:default="1.2"
	// +optional
	MinVersion TLSVersion `json:"minVersion,omitempty"`

	// PlaintextPort, when set, adds an unencrypted listener on this port
	// for clients that cannot speak TLS yet, for the time of a migration.
	// The Service and the NetworkPolicy a user writes must name it
	// ("memcached-plain" on the pods). Leave it unset otherwise: anything
	// that reaches it reads and writes every key.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	PlaintextPort *int32 `json:"plaintextPort,omitempty"`
}

// AuthSpec configures memcached's ASCII authentication.
type AuthSpec struct {
	// SecretName is a Secret in the Memcached's namespace whose key
	// auth-file holds memcached's authentication file: one user:password
	// per line, each ended by a newline (kubectl create secret generic
	// NAME --from-file=auth-file=FILE; --from-literal writes no newline,
	// and the operator refuses such a one-line file, whose password
	// memcached would read one character short).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.security.auth.secretName must be the name of a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`
}

// TLSStatus is the certificate a Memcached serves.
type TLSStatus struct {
	// SecretName is the Secret the certificate was read from.
	SecretName string `json:"secretName,omitempty"`
	// SerialNumber of the server certificate, in hexadecimal.
	SerialNumber string `json:"serialNumber,omitempty"`
	// NotAfter is when the server certificate expires.
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// DNSNames of the server certificate.
	// +listType=atomic
	DNSNames []string `json:"dnsNames,omitempty"`
}

// MemcachedStatus is the observed state of a Memcached.
type MemcachedStatus struct {
	// Conditions: Ready (the summary used by kstatus, Flux and Argo CD),
	// Available, Progressing, Degraded and Stalled.
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

	// ServerList is the ready memcached servers as host:port: what a client
	// that shards keys over a list of servers (most memcached clients) is
	// configured with. With identity Stable the hosts are the pods' stable
	// DNS names in ordinal order (NAME-0.NAME.NAMESPACE.svc:11211, ...), and
	// a replaced pod comes back under its name; with Ephemeral they are pod
	// addresses in address order, and a replaced pod comes back with a new
	// one. It changes when a pod becomes ready or starts stopping.
	// +optional
	// +listType=atomic
	ServerList []string `json:"serverList,omitempty"`

	// TLS is the certificate of spec.security.tls's Secret, which the pods
	// serve (their reloader loads a new one without a restart): unset when
	// TLS is off.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`
}

// Memcached runs a memcached cache: a Deployment (a StatefulSet with
// identity Stable), a headless Service and, when it has more than one pod,
// a PodDisruptionBudget, all named after it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=mc,categories=cache
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.spec.identity`,priority=1
// +kubebuilder:printcolumn:name="Servers",type=string,JSONPath=`.status.serverList`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.identity) || self.spec.identity != 'Stable' || size(self.metadata.name) <= 52",message="metadata.name of a Memcached with spec.identity: Stable must be at most 52 characters: its StatefulSet's pods are labelled NAME-<revision hash>, and a label value is at most 63 characters"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit (a DNS-1035 label): it names the Service and is the value of the app.kubernetes.io/instance label"
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
