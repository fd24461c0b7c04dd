// Package e2e runs the operator end to end on local clusters (real
// kube-apiserver, etcd, controller-manager and scheduler from bin/).
//
// On real nodes (realnodes_test.go: kubelet, containerd, runc), the operator
// runs in-cluster from its own image and the tutorial's Memcached is three
// memcached processes, driven through what only running pods show: probes,
// Services and DNS, rollouts, drains, Pod Security in the kubelet.
//
// On kwok's fake nodes, one fresh cluster per environment: the whole
// rendered overlay is applied, the manager runs out of cluster as the
// overlay's ServiceAccount, and the tutorial's Memcached goes through
// create, scale, image change, pause and delete with every status read
// from real Deployments, ReplicaSets and Pods.
//
// The tests on fake nodes call t.Parallel and the ones on real nodes do
// not, so Go runs every real-node test first, one at a time (a real node
// changes the machine, and TestRealNodesLeaveNoTrace compares the machine
// before and after its own cluster), then the fake-node tests side by
// side (-parallel, GOMAXPROCS by default): they wait on their clusters
// more than they compute, and each takes its own free ports.
//
//	make e2e
package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

const (
	waitFor = 60 * time.Second
)

// want describes what each environment's overlay must bring up.
var environments = []struct {
	env             string
	managerReplicas int
	cacheSize       int
}{
	{"dev", 1, 1},
	{"staging", 2, 2},
	{"prod", 2, 3},
}

func TestE2E(t *testing.T) {
	t.Parallel() // fake nodes only: see the package comment
	bins, err := repo.Bin("kubectl", "kustomize", "manager", "kwokctl")
	if err != nil {
		t.Fatal(err)
	}
	suiteStart := time.Now()
	for _, e := range environments {
		t.Run(e.env, func(t *testing.T) {
			k := cluster.StartLocal(t, "e2e-"+e.env, 3)
			k.DumpOnFailure(t)
			t.Logf("%s: cluster up in %v", e.env, k.Started.Round(time.Millisecond))
			c := k.Client(t)
			kubectl := func(stdin []byte, args ...string) string {
				t.Helper()
				return cluster.Run(t, k.Kubeconfig, stdin, bins["kubectl"], args...)
			}

			// The whole overlay, operator included.
			stdout, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(repo.MustRoot(t), "overlays", e.env))
			if code != 0 {
				t.Fatalf("kustomize build: %s", stderr)
			}
			if e.env == "prod" {
				platform.Prepare(t, k.Kubeconfig)
				certmanager.Start(t, k.Kubeconfig)
			}
			kubectl(nil, "apply", "--server-side", "-k", "deploy/install")
			if out := kubectl([]byte(stdout), "apply", "--server-side", "-f", "-"); strings.Contains(out, "Warning") {
				t.Errorf("apply warned:\n%s", out)
			}

			// The manager's own pods are scheduled and Running on fake
			// nodes, with the image the overlay pins.
			pinned := managerImage(t, c)
			waitPods(t, c, names.OperatorNamespace, "control-plane=controller-manager", e.managerReplicas, pinned)

			// Fake nodes run no containers: the manager runs here, as the
			// overlay's ServiceAccount and as the container of one of its
			// pods, whose image it gives the reloader sidecars.
			pod, err := cluster.ManagerPod(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			cluster.StartManagerAsPod(t, cluster.ImpersonatingKubeconfig(t, k.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount), pod,
				"--leader-elect", "--leader-election-namespace="+names.OperatorNamespace, "--metrics-bind-address=0")

			// The environment's own cache; prod's is secured, with the
			// reloader on the operator's own image.
			cluster.WaitMemcachedReady(t, c, "cache", "app-cache", e.cacheSize)
			if e.env == "prod" {
				pod := deployment(t, c, "cache", "app-cache").Spec.Template.Spec
				var reloader string
				for _, ctr := range pod.Containers {
					if ctr.Name == "reloader" {
						reloader = ctr.Image
					}
				}
				if reloader != pinned {
					t.Errorf("prod's app-cache runs the reloader %q, want the operator's own image %s", reloader, pinned)
				}
			}

			// The tutorial's Memcached, verbatim.
			start := time.Now()
			kubectl(nil, "apply", "--server-side", "-f", "deploy/samples/memcached-sample.yaml")
			cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)
			t.Logf("%s: seed Memcached 3/3 Ready %v after apply", e.env, time.Since(start).Round(time.Millisecond))
			waitPods(t, c, "default", "app.kubernetes.io/instance=memcached-sample", 3, "memcached:1.6.39-alpine")

			kubectl(nil, "scale", "memcached/memcached-sample", "--replicas=5")
			cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 5)

			kubectl(nil, "patch", "memcached/memcached-sample", "--type=merge", "-p", `{"spec":{"image":"memcached:1.6.38-alpine"}}`)
			cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 5)
			waitPods(t, c, "default", "app.kubernetes.io/instance=memcached-sample", 5, "memcached:1.6.38-alpine")

			// Paused: a manual change stays; resumed: it is undone.
			kubectl(nil, "patch", "memcached/memcached-sample", "--type=merge", "-p", `{"spec":{"paused":true}}`)
			cluster.WaitMemcachedCondition(t, c, "default", "memcached-sample", "Progressing", "Paused")
			kubectl(nil, "scale", "deployment/memcached-sample", "--replicas=2")
			waitPods(t, c, "default", "app.kubernetes.io/instance=memcached-sample", 2, "")
			time.Sleep(2 * time.Second)
			if d := deployment(t, c, "default", "memcached-sample"); *d.Spec.Replicas != 2 {
				t.Errorf("a paused Memcached changed its Deployment to %d replicas", *d.Spec.Replicas)
			}
			kubectl(nil, "patch", "memcached/memcached-sample", "--type=merge", "-p", `{"spec":{"paused":false}}`)
			cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 5)

			kubectl(nil, "delete", "memcached/memcached-sample", "--wait", "--timeout=60s")
			cluster.Eventually(t, waitFor, "the owned objects to go", func() error {
				for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
					if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "memcached-sample"}, obj); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%T still there: %w", obj, err)
					}
				}
				return nil
			})
			waitPods(t, c, "default", "app.kubernetes.io/instance=memcached-sample", 0, "")
		})
	}
	t.Logf("e2e of %d environments in %v", len(environments), time.Since(suiteStart).Round(time.Second))
}

func deployment(t *testing.T, c client.Client, namespace, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func managerImage(t *testing.T, c client.Client) string {
	t.Helper()
	return deployment(t, c, names.OperatorNamespace, names.ManagerServiceAccount).Spec.Template.Spec.Containers[0].Image
}

// waitPods waits until exactly n pods match the selector, all Running and
// Ready on a node, with image (when given) in their first container.
func waitPods(t *testing.T, c client.Client, namespace, selector string, n int, image string) {
	t.Helper()
	sel, err := labelSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, waitFor, fmt.Sprintf("%d pods %s in %s", n, selector, namespace), func() error {
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace(namespace), sel); err != nil {
			return err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != n {
			return fmt.Errorf("%d pods", len(live))
		}
		for _, p := range live {
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" || !podReady(p) {
				return fmt.Errorf("pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
			if image != "" && p.Spec.Containers[0].Image != image {
				return fmt.Errorf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func labelSelector(s string) (client.MatchingLabels, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return nil, fmt.Errorf("selector %q: want key=value", s)
	}
	return client.MatchingLabels{k: v}, nil
}
