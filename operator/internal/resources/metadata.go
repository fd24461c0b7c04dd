package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AppName is the value of LabelName on everything the operator creates.
	AppName = "memcached"
	// ManagedBy is the value of LabelManagedBy on everything the operator
	// creates. The manager's cache only holds objects carrying it.
	ManagedBy = "memcached-operator"

	// ConfigHashAnnotation on the pod template changes whenever the memcached
	// configuration changes, so the Deployment rolls its pods.
	ConfigHashAnnotation = "cache.example.com/config-hash"

	// DesiredHashAnnotation on each owned object fingerprints the desired
	// object the operator last applied. The reconciler compares desired
	// with live to skip no-op applies; a field that was removed from desired
	// is invisible to that comparison but changes this hash.
	DesiredHashAnnotation = "cache.example.com/desired-hash"
)

// SelectorLabels select the pods of one Memcached. They include the instance
// label, so two Memcacheds in one namespace never select each other's pods,
// and nothing that changes over the object's life (such as a version), since
// a Deployment's selector is immutable.
func SelectorLabels(m *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{
		LabelName:     AppName,
		LabelInstance: m.Name,
	}
}

// Labels go on every owned object and on the pod template.
func Labels(m *cachev1alpha1.Memcached) map[string]string {
	l := SelectorLabels(m)
	l[LabelManagedBy] = ManagedBy
	return l
}

// Selector is SelectorLabels in the string form of status.selector, which the
// scale subresource (and so the HorizontalPodAutoscaler) reads.
func Selector(m *cachev1alpha1.Memcached) string {
	// Sorted by key, as labels.SelectorFromSet would print it.
	return fmt.Sprintf("%s=%s,%s=%s", LabelInstance, m.Name, LabelName, AppName)
}

// ownerReference makes the Memcached the controller of an owned object, so
// that garbage collection removes it and the manager's Owns() watches map its
// events back to the Memcached.
func ownerReference(m *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(m.Name).
		WithUID(m.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// convert copies a typed API value (as users write it in the Memcached spec)
// into the matching apply configuration. Both serialise to the same JSON, which
// is the contract client-go's apply configurations are generated from.
func convert[T any](in any) *T {
	raw, err := json.Marshal(in)
	if err != nil {
		// Typed API values always marshal; failing here is a programming error.
		panic(fmt.Sprintf("resources: marshal %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("resources: unmarshal %T into %T: %v", in, out, err))
	}
	return out
}

// withDesiredHash stamps DesiredHashAnnotation on a finished apply
// configuration. json.Marshal sorts map keys, so the hash is stable.
func withDesiredHash[T interface{ WithAnnotations(map[string]string) T }](obj T) T {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("resources: marshal %T: %v", obj, err))
	}
	sum := sha256.Sum256(raw)
	return obj.WithAnnotations(map[string]string{DesiredHashAnnotation: hex.EncodeToString(sum[:8])})
}
