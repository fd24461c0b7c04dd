package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
)

// What Kubernetes itself does with the operator's objects, on a cluster
// where the scheduler, the Deployment and ReplicaSet controllers, the
// garbage collector and quota admission are the real ones: rollouts under
// hard anti-affinity, the three deletion propagation policies, and pods the
// cluster refuses to create.
func TestKubernetesSemantics(t *testing.T) {
	t.Parallel() // fake nodes only: see the package comment
	bins, err := repo.Bin("kubectl", "manager", "kwokctl")
	if err != nil {
		t.Fatal(err)
	}
	// Exactly as many nodes as the rollout test's cache has pods.
	k := cluster.StartLocal(t, "e2e-semantics", 3)
	k.DumpOnFailure(t)
	c := k.Client(t)
	kubectl := func(args ...string) string {
		t.Helper()
		return cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], args...)
	}
	kubectl("apply", "--server-side", "-k", "deploy/install")
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com")
	cluster.StartManager(t, cluster.ImpersonatingKubeconfig(t, k.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount), "--metrics-bind-address=0")

	apply := func(name, spec string) {
		t.Helper()
		manifest := fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %s\n  namespace: default\nspec:\n%s", name, spec)
		cluster.Run(t, k.Kubeconfig, []byte(manifest), bins["kubectl"], "apply", "--server-side", "-f", "-")
	}

	// A cache pod starts empty, so the operator rolls pods in place
	// (maxSurge 0) instead of surging: with antiAffinity: Hard and exactly
	// size nodes, a surge pod would have nowhere to go and every rollout
	// (an image change, an operator upgrade) would stall.
	t.Run("rollout with hard anti-affinity on exactly size nodes", func(t *testing.T) {
		apply("spread", "  size: 3\n  highAvailability:\n    antiAffinity: Hard\n")
		cluster.WaitMemcachedReady(t, c, "default", "spread", 3)
		waitPods(t, c, "default", "app.kubernetes.io/instance=spread", 3, "memcached:1.6.39-alpine")
		start := time.Now()
		kubectl("patch", "memcached/spread", "--type=merge", "-p", `{"spec":{"image":"memcached:1.6.38-alpine"}}`)
		cluster.WaitMemcachedReady(t, c, "default", "spread", 3)
		waitPods(t, c, "default", "app.kubernetes.io/instance=spread", 3, "memcached:1.6.38-alpine")
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace("default"), client.MatchingLabels{"app.kubernetes.io/instance": "spread"}); err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			nodes[p.Spec.NodeName] = true
		}
		if len(nodes) != 3 {
			t.Errorf("pods on %d nodes, want one on each of 3", len(nodes))
		}
		t.Logf("image rollout of 3 pods on 3 nodes completed in %v", time.Since(start).Round(100*time.Millisecond))
		kubectl("delete", "memcached/spread", "--wait", "--timeout=60s")
	})

	t.Run("delete --cascade=orphan keeps what it owned", func(t *testing.T) {
		apply("kept", "  size: 2\n")
		cluster.WaitMemcachedReady(t, c, "default", "kept", 2)
		kubectl("delete", "memcached/kept", "--cascade=orphan", "--wait", "--timeout=60s")
		for _, obj := range owned("kept") {
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "kept"}, obj); err != nil {
				t.Errorf("%T kept is gone: %v", obj, err)
				continue
			}
			if len(obj.GetOwnerReferences()) != 0 || obj.GetDeletionTimestamp() != nil {
				t.Errorf("%T kept: owners %v, deletion %v; want an orphan left alone", obj, obj.GetOwnerReferences(), obj.GetDeletionTimestamp())
			}
		}
		waitPods(t, c, "default", "app.kubernetes.io/instance=kept", 2, "")
		// The orphans are the user's now.
		kubectl("delete", "deployment/kept", "service/kept", "pdb/kept")
	})

	t.Run("delete --cascade=foreground completes", func(t *testing.T) {
		apply("fore", "  size: 2\n")
		cluster.WaitMemcachedReady(t, c, "default", "fore", 2)
		kubectl("delete", "memcached/fore", "--cascade=foreground", "--wait", "--timeout=60s")
		expectGone(t, c, "fore")
		waitPods(t, c, "default", "app.kubernetes.io/instance=fore", 0, "")
	})

	t.Run("deleting never hangs on objects already gone", func(t *testing.T) {
		apply("gone", "  size: 2\n  paused: true\n")
		cluster.Eventually(t, waitFor, "the paused Memcached to hold its finalizer", func() error {
			mc, err := cluster.Memcached(c, "default", "gone")
			if err != nil {
				return err
			}
			if len(mc.GetFinalizers()) == 0 {
				return fmt.Errorf("no finalizer yet")
			}
			return nil
		})
		kubectl("delete", "memcached/gone", "--wait", "--timeout=60s")
		expectGone(t, c, "gone")
	})

	// The cluster refuses the pods (here a ResourceQuota of zero pods, as a
	// Pod Security rejection or a missing PriorityClass would): the
	// Deployment reports ReplicaFailure long before its 10-minute progress
	// deadline, and the Memcached turns Degraded and Stalled at once with
	// the cluster's message, so kstatus (Flux, kubectl wait) reports Failed.
	// Lifting the quota heals it without a restart.
	t.Run("pods the cluster refuses stall the Memcached", func(t *testing.T) {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quota"}}
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: "quota"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
		}
		for _, obj := range []client.Object{ns, quota} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		cluster.Run(t, k.Kubeconfig, []byte("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: refused\n  namespace: quota\nspec:\n  size: 2\n"),
			bins["kubectl"], "apply", "--server-side", "-f", "-")
		cluster.WaitMemcachedCondition(t, c, "quota", "refused", "Stalled", "ReplicaFailure")
		mc, err := cluster.Memcached(c, "quota", "refused")
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.MemcachedCondition(mc, "Degraded", "True", "ReplicaFailure"); err != nil {
			t.Error(err)
		}
		msg := conditionMessage(mc, "Stalled")
		if !strings.Contains(msg, "exceeded quota") {
			t.Errorf("Stalled message %q does not carry the cluster's reason", msg)
		}
		res, err := status.Compute(mc)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != status.FailedStatus {
			t.Errorf("kstatus says %s (%s), want Failed", res.Status, res.Message)
		}
		t.Logf("Stalled %v after the Memcached was applied: %s", time.Since(start).Round(100*time.Millisecond), msg)

		if err := c.Delete(ctx, quota); err != nil {
			t.Fatal(err)
		}
		cluster.WaitMemcachedReady(t, c, "quota", "refused", 2)
		mc, _ = cluster.Memcached(c, "quota", "refused")
		if err := cluster.MemcachedCondition(mc, "Stalled", "False", ""); err != nil {
			t.Error(err)
		}
	})
}

func owned(name string) []client.Object {
	meta := metav1.ObjectMeta{Namespace: "default", Name: name}
	return []client.Object{&appsv1.Deployment{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &policyv1.PodDisruptionBudget{ObjectMeta: meta}}
}

// expectGone checks that the Memcached and everything it owned are gone.
func expectGone(t *testing.T, c client.Client, name string) {
	t.Helper()
	cluster.Eventually(t, waitFor, name+" and its objects to go", func() error {
		if _, err := cluster.Memcached(c, "default", name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Memcached %s: %w", name, err)
		}
		for _, obj := range owned(name) {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there: %w", obj, name, err)
			}
		}
		return nil
	})
}

func conditionMessage(mc *unstructured.Unstructured, condType string) string {
	conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, raw := range conditions {
		if cond, _ := raw.(map[string]any); cond["type"] == condType {
			msg, _ := cond["message"].(string)
			return msg
		}
	}
	return ""
}
