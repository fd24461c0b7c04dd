package controller

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Pods are watched for two things neither the Deployment nor its
// ReplicaSet carries: the server list (status.serverList: the ready pods'
// addresses, which clients shard keys over) and the reason a pod cannot
// run. A kubelet that refuses a container (CreateContainerConfigError), an
// image that cannot be pulled or a scheduler that finds no node leaves the
// Deployment's status at "2 of 3 ready" until its progress deadline, ten
// minutes later, and even then without the reason. So the cache holds the
// operator's pods reduced to their names, instance label, address,
// readiness and the few status fields that carry a refusal (slimPod),
// indexed by instance; a pod event reaches the reconciler only when a
// pod's server entry or trouble appears, changes or goes away.

// podInstanceIndex indexes cached pods by the Memcached they run for.
const podInstanceIndex = "memcached.instance"

func podInstance(obj client.Object) []string {
	if name := obj.GetLabels()[resources.LabelInstance]; name != "" {
		return []string{name}
	}
	return nil
}

// slimPod is the cache transform of pods: it keeps what podTrouble,
// serverOf and the index read and drops the rest (the spec, most of the status, annotations,
// managedFields), so a cached pod costs a few hundred bytes.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
	}
	if name, ok := p.Labels[resources.LabelInstance]; ok {
		slim.Labels = map[string]string{resources.LabelInstance: name}
	}
	slim.Status.PodIP = p.Status.PodIP
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodScheduled:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case corev1.PodReady:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
	}
	slim.Status.InitContainerStatuses = slimContainerStatuses(p.Status.InitContainerStatuses)
	slim.Status.ContainerStatuses = slimContainerStatuses(p.Status.ContainerStatuses)
	return slim, nil
}

func slimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range in {
		slim := corev1.ContainerStatus{Name: s.Name}
		if w := s.State.Waiting; w != nil {
			slim.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			if t := s.LastTerminationState.Terminated; t != nil {
				slim.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
			}
		}
		out = append(out, slim)
	}
	return out
}

// podTrouble says why a pod cannot run, or "" when nothing it reports
// stops it. A container counts as failing by the rule Argo CD's pod health
// uses (gitops-engine pkg/health): a waiting reason starting with "Err" or
// ending in "Error" or "BackOff". The text is kept stable while the cause
// is: the kubelet alternates ErrImagePull and ImagePullBackOff and rewrites
// a crash loop's back-off delay, and each change would otherwise cost a
// reconcile and a status write.
func podTrouble(p *corev1.Pod) (reason, message string) {
	if !p.DeletionTimestamp.IsZero() {
		return "", ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return cachev1alpha1.ReasonPodsUnschedulable, fmt.Sprintf("pod %s cannot be scheduled: %s", p.Name, c.Message)
		}
	}
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		w := s.State.Waiting
		if w == nil || !failing(w.Reason) {
			continue
		}
		what := fmt.Sprintf("%s: %s", w.Reason, w.Message)
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff":
			cause := w.Message
			if _, after, found := strings.Cut(cause, ": ErrImagePull: "); found {
				cause = after
			}
			what = "cannot pull its image: " + cause
		case "CrashLoopBackOff":
			what = "crash loop"
			if t := s.LastTerminationState.Terminated; t != nil {
				what = fmt.Sprintf("crash loop: last exit code %d (%s)", t.ExitCode, t.Reason)
			}
		}
		return cachev1alpha1.ReasonPodsFailing, fmt.Sprintf("pod %s, container %s: %s", p.Name, s.Name, what)
	}
	return "", ""
}

// failing is Argo CD's rule for a waiting reason that means the container
// cannot run, as opposed to one on its way (ContainerCreating,
// PodInitializing).
func failing(reason string) bool {
	return strings.HasPrefix(reason, "Err") || strings.HasSuffix(reason, "Error") || strings.HasSuffix(reason, "BackOff")
}

// maxPodTroubleMessage bounds the part of a condition message quoted from
// the scheduler or the kubelet (metav1.Condition allows 32 KiB).
const maxPodTroubleMessage = 1024

// serverOf is a pod's entry in the server list, host:port, or "" when the
// pod does not serve: not ready, terminating (Endpoints drop it too), or
// without an address yet.
func serverOf(p *corev1.Pod) string {
	if !p.DeletionTimestamp.IsZero() || p.Status.PodIP == "" {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(cachev1alpha1.MemcachedPort))
		}
	}
	return ""
}

// serverList is the ready pods' entries: with identity Stable their DNS
// names in ordinal order, else their addresses in address order (numeric,
// IPv4 before IPv6). Either way it changes only when the set of servers
// does.
func serverList(mc *cachev1alpha1.Memcached, pods []corev1.Pod) []string {
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		return stableServerList(mc, pods)
	}
	type server struct {
		addr  netip.Addr
		entry string
	}
	var servers []server
	for i := range pods {
		if entry := serverOf(&pods[i]); entry != "" {
			addr, _ := netip.ParseAddr(pods[i].Status.PodIP)
			servers = append(servers, server{addr, entry})
		}
	}
	slices.SortFunc(servers, func(a, b server) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		return strings.Compare(a.entry, b.entry)
	})
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.entry
	}
	return out
}

// stableServerList lists the ready pods of a StatefulSet under their
// stable names, NAME-i.NAME.NAMESPACE.svc:11211, by ordinal.
func stableServerList(mc *cachev1alpha1.Memcached, pods []corev1.Pod) []string {
	type server struct {
		ordinal int
		entry   string
	}
	var servers []server
	for i := range pods {
		if serverOf(&pods[i]) == "" {
			continue
		}
		ordinal, err := strconv.Atoi(strings.TrimPrefix(pods[i].Name, mc.Name+"-"))
		if err != nil || !strings.HasPrefix(pods[i].Name, mc.Name+"-") {
			// Not one of the StatefulSet's pods (a pod left from
			// elsewhere carrying the labels): it has no stable name.
			continue
		}
		servers = append(servers, server{ordinal, resources.StableServer(mc, pods[i].Name)})
	}
	slices.SortFunc(servers, func(a, b server) int { return a.ordinal - b.ordinal })
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.entry
	}
	return out
}

// podsTrouble summarises the trouble of a Memcached's pods: the reason of
// the first troubled pod in name order, so the summary does not change with
// list order, with how many pods share a trouble.
func podsTrouble(pods []corev1.Pod) (reason, message string) {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	troubled := 0
	for i := range pods {
		r, m := podTrouble(&pods[i])
		if r == "" {
			continue
		}
		troubled++
		if reason == "" {
			reason, message = r, m
		}
	}
	if reason == "" {
		return "", ""
	}
	if len(message) > maxPodTroubleMessage {
		message = message[:maxPodTroubleMessage] + "..."
	}
	return reason, fmt.Sprintf("%d of %d pods cannot run; %s", troubled, len(pods), message)
}

// readPods reads the pods of mc from the cache, by index, and reports
// what they say: the server list, and, when wantTrouble, why pods cannot
// run.
func (r *MemcachedReconciler) readPods(ctx context.Context, mc *cachev1alpha1.Memcached, wantTrouble bool) (podsReport, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(mc.Namespace), client.MatchingFields{podInstanceIndex: mc.Name}); err != nil {
		return podsReport{}, fmt.Errorf("list pods of %s: %w", mc.Name, err)
	}
	report := podsReport{servers: serverList(mc, pods.Items)}
	if wantTrouble {
		report.reason, report.message = podsTrouble(pods.Items)
	}
	return report, nil
}

// podChanged passes pod events whose server entry or trouble appeared,
// changed or went away; the rest of a pod's life (scheduled, started)
// reaches the Memcached through its Deployment's status, if at all.
var podChanged = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return podSummary(e.Object) != (podSummaryOf{}) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return podSummary(e.ObjectOld) != podSummary(e.ObjectNew) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return podSummary(e.Object) != (podSummaryOf{}) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// podSummaryOf is what the Memcached's status takes from one pod.
type podSummaryOf struct{ server, trouble string }

func podSummary(obj client.Object) podSummaryOf {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return podSummaryOf{}
	}
	_, message := podTrouble(p)
	return podSummaryOf{server: serverOf(p), trouble: message}
}

// podOwner maps a pod to the Memcached named by its instance label. Pods
// belong to ReplicaSets, not to the Memcached, so owner references do not
// lead there; the label is on every pod the operator's template makes.
var podOwner = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
	names := podInstance(obj)
	if len(names) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: names[0]}}}
})
