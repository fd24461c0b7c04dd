package resources

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Where a pod with warm restart keeps its memory file: a claim of its own,
// from the StatefulSet's claim template, so that the pod that replaces it
// (same name, same ordinal) mounts the same file.
const (
	MemoryFileVolume    = "memory-file"
	MemoryFileMountPath = "/var/lib/memcached"
	MemoryFile          = MemoryFileMountPath + "/memory"
)

// StatefulSet returns the StatefulSet that runs the memcached pods of a
// Memcached with identity Stable: pod i is NAME-i, and the headless Service
// (its serviceName) gives it the DNS name NAME-i.NAME.NAMESPACE.svc, so a
// replaced pod comes back where clients' hash rings expect it.
//
// Pods start and stop in parallel (a cache's pods need no order), while a
// rollout still replaces one pod at a time, waiting minReadySeconds after
// each. Scaling down removes the highest ordinals first, whatever the
// policy, so NAME-0 ... NAME-(size-1) always remain.
func StatefulSet(m *cachev1alpha1.Memcached, opts Options) *appsv1ac.StatefulSetApplyConfiguration {
	spec := appsv1ac.StatefulSetSpec().
		WithReplicas(m.GetSize()).
		WithServiceName(m.Name).
		WithPodManagementPolicy(appsv1.ParallelPodManagement).
		WithMinReadySeconds(m.MinReadySeconds()).
		WithRevisionHistoryLimit(ptr.Deref(m.Spec.RevisionHistoryLimit, cachev1alpha1.DefaultRevisionHistoryLimit)).
		WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
		WithTemplate(podTemplate(m, opts))
	if w := m.WarmRestart(); w != nil {
		claim := corev1ac.PersistentVolumeClaim(MemoryFileVolume, "").
			WithLabels(Labels(m)).
			WithSpec(corev1ac.PersistentVolumeClaimSpec().
				WithAccessModes(corev1.ReadWriteOnce).
				WithResources(corev1ac.VolumeResourceRequirements().
					WithRequests(corev1.ResourceList{corev1.ResourceStorage: MemoryFileSize(m)})))
		if w.StorageClassName != nil {
			claim.Spec.WithStorageClassName(*w.StorageClassName)
		}
		// The claims go with their pods: a file left behind by a scale-down
		// would come back, at the next scale-up, holding values clients
		// have since changed on other servers.
		spec.WithVolumeClaimTemplates(claim).
			WithPersistentVolumeClaimRetentionPolicy(appsv1ac.StatefulSetPersistentVolumeClaimRetentionPolicy().
				WithWhenDeleted(appsv1.DeletePersistentVolumeClaimRetentionPolicyType).
				WithWhenScaled(appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
	}
	return withDesiredHash(appsv1ac.StatefulSet(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec))
}

// MemoryFileSize is the claim a pod's memory file needs: memcached sizes
// the file to its item memory (-m), and writes a metadata file of a few
// kilobytes beside it when it stops.
func MemoryFileSize(m *cachev1alpha1.Memcached) resource.Quantity {
	return resource.MustParse(strconv.Itoa(int(m.MaxMemoryMB())+1) + "Mi")
}

// StableServer is the server list entry of a stable pod: its DNS name
// under the headless Service, and the memcached port.
func StableServer(m *cachev1alpha1.Memcached, podName string) string {
	return podName + "." + m.Name + "." + m.Namespace + ".svc:" + strconv.Itoa(cachev1alpha1.MemcachedPort)
}
