package v1alpha1

// Condition types of a Memcached. Ready is the summary that kstatus (and so
// Flux health checks and `kubectl wait --for=condition=Ready`) and the Argo CD
// health check read; the others explain it.
const (
	// ConditionReady is True when every wanted pod is updated and ready, or
	// when size is 0 and no pod is left.
	ConditionReady = "Ready"
	// ConditionAvailable mirrors the Deployment's Available condition: at
	// least the minimum number of pods serve traffic.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the operator or the Deployment is
	// still moving towards the spec (rollout, scale, first apply).
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the spec cannot be realised: the
	// apiserver rejects an owned object, the Deployment cannot create pods,
	// the scheduler or the kubelet refuses a pod, or the rollout exceeded its
	// deadline.
	ConditionDegraded = "Degraded"
	// ConditionStalled is True when the operator cannot make progress
	// without someone changing the spec or the cluster (a rejected object, a
	// missing permission, a name taken by someone else's object, pods the
	// cluster refuses). kstatus reads it as Failed, so Flux, Argo CD and
	// `kubectl wait` stop waiting at once. The operator keeps retrying with
	// backoff, so fixing the cause heals without a restart.
	ConditionStalled = "Stalled"
	// ConditionCertificateExpiring is True when the certificate of
	// spec.security.tls has less than a sixth of its lifetime (at most a
	// week) left: its renewal has failed for a while. It does not change
	// Ready; an expired certificate does (Stalled, CertificateExpired).
	ConditionCertificateExpiring = "CertificateExpiring"
	// ConditionCertificateNamesMissing is True when the certificate of
	// spec.security.tls does not name every server clients are given: the
	// Service's name of status.endpoint and, with identity Stable, each
	// pod's name of status.serverList. A client that verifies host names
	// refuses those servers. It does not change Ready: memcached serves,
	// and clients that verify another name (the Service's, for Ephemeral
	// pods' addresses) are not affected.
	ConditionCertificateNamesMissing = "CertificateNamesMissing"
)

// Condition reasons. Each is CamelCase, as metav1.Condition requires.
const (
	// ReasonReady: all wanted pods are updated and ready.
	ReasonReady = "Ready"
	// ReasonRollingOut: the Deployment is replacing or adding pods.
	ReasonRollingOut = "RollingOut"
	// ReasonScaling: the pod count differs from spec.size.
	ReasonScaling = "Scaling"
	// ReasonWaitingForDeployment: the Deployment controller has not yet
	// observed the latest Deployment spec.
	ReasonWaitingForDeployment = "WaitingForDeployment"
	// ReasonMinimumReplicasAvailable / ReasonMinimumReplicasUnavailable mirror
	// the Deployment's Available condition.
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonComplete: nothing is in progress.
	ReasonComplete = "Complete"
	// ReasonPaused: spec.paused is true, owned objects are left alone.
	ReasonPaused = "Paused"
	// ReasonAsExpected: Degraded or Stalled is False.
	ReasonAsExpected = "AsExpected"
	// ReasonApplyFailed: the apiserver rejected an owned object for a
	// reason that may pass on its own (a conflict, a timeout, an outage).
	ReasonApplyFailed = "ApplyFailed"
	// ReasonInvalid: the apiserver or an admission policy rejected an owned
	// object as invalid (HTTP 422 or a policy denial).
	ReasonInvalid = "Invalid"
	// ReasonForbidden: the operator lacks a permission it needs (HTTP 403).
	ReasonForbidden = "Forbidden"
	// ReasonResourceExists: an object with the name the operator needs exists
	// and is not controlled by this Memcached; the operator leaves it alone.
	ReasonResourceExists = "ResourceExists"
	// ReasonReplicaFailure mirrors the Deployment's ReplicaFailure condition:
	// the cluster refuses to create pods (quota, Pod Security, a missing
	// PriorityClass or ServiceAccount).
	ReasonReplicaFailure = "ReplicaFailure"
	// ReasonProgressDeadlineExceeded mirrors the Deployment's reason when its
	// rollout stalls (image pull errors, crash loops, unschedulable pods).
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonPodsUnschedulable: the scheduler finds no node for a pod (too
	// few nodes for hard anti-affinity, a node selector nothing matches,
	// taints, resources). The message is the scheduler's.
	ReasonPodsUnschedulable = "PodsUnschedulable"
	// ReasonPodsFailing: the kubelet cannot start or keep running a pod's
	// container: an image it cannot pull, a container it refuses to create
	// (an image that runs as root under runAsNonRoot), a crash loop. The
	// message is the kubelet's. It degrades but does not stall: the kubelet
	// keeps retrying, and a registry or Secret that comes back heals it.
	ReasonPodsFailing = "PodsFailing"
	// ReasonCertificateExpiring: see ConditionCertificateExpiring.
	ReasonCertificateExpiring = "CertificateExpiring"
	// ReasonCertificateNamesMissing: see ConditionCertificateNamesMissing.
	ReasonCertificateNamesMissing = "CertificateNamesMissing"
	// ReasonReloaderImageUnknown: spec.security needs the reloader sidecar
	// and the operator was started without knowing its own image.
	ReasonReloaderImageUnknown = "ReloaderImageUnknown"
	// The Secrets of spec.security: SecretNotFound, SecretInvalid and
	// CertificateExpired stall the Memcached with a message that names the
	// Secret, the key and the fix; the pods are left as they are.
)

// Finalizer is set on every Memcached so that deleting it removes the owned
// objects explicitly and reports it, instead of leaving it to garbage
// collection. `kubectl delete --cascade=orphan` is honoured: the owned
// objects are then left in place.
const Finalizer = "cache.example.com/finalizer"
