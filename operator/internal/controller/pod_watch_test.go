//go:build !unit

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// A pod the kubelet refuses turns its Memcached Degraded (not Stalled) with
// the kubelet's reason, through the pod watch: the Deployment's status does
// not change when the kubelet refuses a container. When the pod recovers,
// so does the Memcached.
func TestRefusedPodIsReported(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "refused", 1)
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) { fetch(g, deploymentOf(mc)) }, timeout, interval).Should(Succeed())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused-abc", Labels: resources.Labels(mc)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
	}
	g.Expect(k8sClient.Create(testCtx, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("CreateContainerConfigError", "container has runAsNonRoot and image will run as root")}
	g.Expect(k8sClient.Status().Update(testCtx, pod)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionDegraded)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonPodsFailing))
		g.Expect(c.Message).To(Equal("1 of 1 pods cannot run; pod refused-abc, container memcached: CreateContainerConfigError: container has runAsNonRoot and image will run as root"))
		g.Expect(condition(g, mc, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(g, mc, cachev1alpha1.ConditionReady).Reason).To(Equal(cachev1alpha1.ReasonPodsFailing))
	}, timeout, interval).Should(Succeed())

	pod = fetch(g, pod)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	g.Expect(k8sClient.Status().Update(testCtx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, mc, cachev1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
	markDeploymentReady(t, mc)
	expectReady(t, mc)
}

// status.serverList follows the pods' readiness through the pod watch.
func TestServerListFollowsReadiness(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "servers", 2)
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) { fetch(g, deploymentOf(mc)) }, timeout, interval).Should(Succeed())

	setReady := func(pod *corev1.Pod, ip string, ready bool) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			cur := fetch(g, pod)
			cur.Status = readyPod(cur.Name, ip, ready).Status
			g.Expect(k8sClient.Status().Update(testCtx, cur)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}
	var pods []*corev1.Pod
	for _, name := range []string{"servers-a", "servers-b"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: resources.Labels(mc)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
		}
		g.Expect(k8sClient.Create(testCtx, pod)).To(Succeed())
		pods = append(pods, pod)
	}
	setReady(pods[0], "10.1.0.20", true)
	setReady(pods[1], "10.1.0.3", true)
	serverList := func(g Gomega) []string { return fetch(g, mc).Status.ServerList }
	g.Eventually(serverList, timeout, interval).Should(Equal([]string{"10.1.0.3:11211", "10.1.0.20:11211"}))

	setReady(pods[1], "10.1.0.3", false)
	g.Eventually(serverList, timeout, interval).Should(Equal([]string{"10.1.0.20:11211"}))
	g.Expect(k8sClient.Delete(testCtx, pods[0])).To(Succeed())
	g.Eventually(serverList, timeout, interval).Should(BeEmpty())
}
