package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

func waiting(reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "memcached", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

func podWith(name string, status corev1.PodStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: status}
}

func TestPodTrouble(t *testing.T) {
	crashed := waiting("CrashLoopBackOff", "back-off 40s restarting failed container=memcached pod=m-1")
	crashed.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 71, Reason: "Error"}
	tests := []struct {
		name        string
		status      corev1.PodStatus
		terminating bool
		wantReason  string
		wantMessage string
	}{
		{name: "running", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
		{name: "creating its container", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating", "")}}},
		{name: "pending, not yet scheduled", status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}}},
		{
			name: "unschedulable",
			status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
			}}},
			wantReason:  cachev1alpha1.ReasonPodsUnschedulable,
			wantMessage: "pod m-1 cannot be scheduled: 0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name:        "refused by the kubelet",
			status:      corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("CreateContainerConfigError", "container has runAsNonRoot and image will run as root")}},
			wantReason:  cachev1alpha1.ReasonPodsFailing,
			wantMessage: "pod m-1, container memcached: CreateContainerConfigError: container has runAsNonRoot and image will run as root",
		},
		{
			name:        "image pull, first failure",
			status:      corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull", "failed to resolve reference: not found")}},
			wantReason:  cachev1alpha1.ReasonPodsFailing,
			wantMessage: "pod m-1, container memcached: cannot pull its image: failed to resolve reference: not found",
		},
		{
			name:        "image pull backing off says the same",
			status:      corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff", `Back-off pulling image "x:1": ErrImagePull: failed to resolve reference: not found`)}},
			wantReason:  cachev1alpha1.ReasonPodsFailing,
			wantMessage: "pod m-1, container memcached: cannot pull its image: failed to resolve reference: not found",
		},
		{
			name:        "crash loop, without the changing back-off delay",
			status:      corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{crashed}},
			wantReason:  cachev1alpha1.ReasonPodsFailing,
			wantMessage: "pod m-1, container memcached: crash loop: last exit code 71 (Error)",
		},
		{
			name:        "an init container counts too",
			status:      corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{waiting("RunContainerError", "exec: not found")}},
			wantReason:  cachev1alpha1.ReasonPodsFailing,
			wantMessage: "pod m-1, container memcached: RunContainerError: exec: not found",
		},
		{
			name:        "a terminating pod is no trouble",
			status:      corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("CreateContainerConfigError", "x")}},
			terminating: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := podWith("m-1", tt.status)
			if tt.terminating {
				p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			reason, message := podTrouble(&p)
			g.Expect(reason).To(Equal(tt.wantReason))
			g.Expect(message).To(Equal(tt.wantMessage))

			// The cached, slimmed pod says the same.
			slim, err := slimPod(&p)
			g.Expect(err).NotTo(HaveOccurred())
			reason, message = podTrouble(slim.(*corev1.Pod))
			g.Expect(reason).To(Equal(tt.wantReason))
			g.Expect(message).To(Equal(tt.wantMessage))
		})
	}
}

// The summary names the first troubled pod by name, whatever the list
// order, and counts the others; a long kubelet message is cut.
func TestPodsTrouble(t *testing.T) {
	g := NewWithT(t)
	refused := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("CreateContainerConfigError", "refused")}}
	pods := []corev1.Pod{podWith("m-c", refused), podWith("m-a", corev1.PodStatus{}), podWith("m-b", refused)}
	reason, message := podsTrouble(pods)
	g.Expect(reason).To(Equal(cachev1alpha1.ReasonPodsFailing))
	g.Expect(message).To(Equal("2 of 3 pods cannot run; pod m-b, container memcached: CreateContainerConfigError: refused"))

	reason, _ = podsTrouble([]corev1.Pod{podWith("m-a", corev1.PodStatus{})})
	g.Expect(reason).To(BeEmpty())

	long := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull", strings.Repeat("x", 5000))}}
	_, message = podsTrouble([]corev1.Pod{podWith("m-a", long)})
	g.Expect(len(message)).To(BeNumerically("<", maxPodTroubleMessage+100))
}

// The cache keeps a pod's name, instance label, address, readiness and
// trouble, nothing else.
func TestSlimPod(t *testing.T) {
	g := NewWithT(t)
	p := podWith("m-1", corev1.PodStatus{
		Phase:             corev1.PodPending,
		PodIP:             "10.0.0.1",
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", Image: "memcached:1.6", ImageID: "sha256:x", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	})
	p.Namespace = "ns"
	p.Labels = map[string]string{resources.LabelInstance: "m", resources.LabelName: "memcached", "pod-template-hash": "abc"}
	p.Annotations = map[string]string{"a": "b"}
	p.Spec.Containers = []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}

	slim, err := slimPod(&p)
	g.Expect(err).NotTo(HaveOccurred())
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "m-1", Namespace: "ns", Labels: map[string]string{resources.LabelInstance: "m"}},
		Status: corev1.PodStatus{
			PodIP:             "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached"}},
		},
	}
	g.Expect(slim).To(Equal(want))
	again, err := slimPod(slim)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(want), "slimming twice")
	g.Expect(podInstance(slim.(*corev1.Pod))).To(Equal([]string{"m"}))
}

func readyPod(name, ip string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return podWith(name, corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}})
}

// The server list holds the ready, live pods with an address, in address
// order (numerically, not as strings), whatever the list order.
func TestServerList(t *testing.T) {
	g := NewWithT(t)
	terminating := readyPod("m-t", "10.0.0.4", true)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pods := []corev1.Pod{
		readyPod("m-a", "10.0.0.10", true),
		readyPod("m-b", "10.0.0.9", true),
		readyPod("m-c", "10.0.0.2", false),
		readyPod("m-d", "", true),
		terminating,
		readyPod("m-e", "fd00::1", true),
	}
	ephemeral := newMemcached("ns", "m", 3)
	g.Expect(serverList(ephemeral, pods)).To(Equal([]string{"10.0.0.9:11211", "10.0.0.10:11211", "[fd00::1]:11211"}))
	slices.Reverse(pods)
	g.Expect(serverList(ephemeral, pods)).To(Equal([]string{"10.0.0.9:11211", "10.0.0.10:11211", "[fd00::1]:11211"}))
	g.Expect(serverList(ephemeral, nil)).To(BeEmpty())

	// With identity Stable: the pods' DNS names, by ordinal (10 after 2),
	// whatever their addresses; pods not named NAME-ORDINAL have none.
	stable := newMemcached("ns", "m", 3)
	stable.Spec.Identity = cachev1alpha1.IdentityStable
	stablePods := []corev1.Pod{
		readyPod("m-10", "10.0.0.1", true),
		readyPod("m-2", "10.0.0.9", true),
		readyPod("m-0", "10.0.0.5", true),
		readyPod("m-1", "10.0.0.6", false),
		readyPod("m-x", "10.0.0.7", true),
		readyPod("other-3", "10.0.0.8", true),
	}
	g.Expect(serverList(stable, stablePods)).To(Equal([]string{
		"m-0.m.ns.svc:11211", "m-2.m.ns.svc:11211", "m-10.m.ns.svc:11211",
	}))

	// Readiness and trouble are what a pod event is passed on for.
	notReady, ready := readyPod("m-a", "10.0.0.10", false), readyPod("m-a", "10.0.0.10", true)
	g.Expect(podSummary(&notReady)).NotTo(Equal(podSummary(&ready)))
	moved := readyPod("m-a", "10.0.0.11", true)
	g.Expect(podSummary(&moved)).NotTo(Equal(podSummary(&ready)))
	again := readyPod("m-a", "10.0.0.10", true)
	g.Expect(podSummary(&again)).To(Equal(podSummary(&ready)))
}
