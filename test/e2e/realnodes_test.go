package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// TestRealNodes runs the operator's main job with real pods: three real
// nodes (kubelet, containerd, runc), the operator deployed by make deploy
// from make docker-build's image, and the tutorial's Memcached as three
// running memcached processes, with real probes, Services, DNS, rollouts,
// drains and Pod Security enforced by the kubelet; then prod's secured
// cache, with its certificate and password rotated in place
// (securedCacheOnRealNodes). On kwok's fake nodes none of this runs: a
// wrong port in the pod template passes there and fails here.
func TestRealNodes(t *testing.T) {
	bins, err := repo.Bin("kubectl", "kubelet", "kube-proxy", "coredns")
	if err != nil {
		t.Fatal(err)
	}
	root := repo.MustRoot(t)
	start := time.Now()
	if out, err := exec.Command("make", "--no-print-directory", "-C", root, "docker-build").CombinedOutput(); err != nil {
		t.Fatalf("make docker-build: %v\n%s", err, out)
	}
	t.Logf("make docker-build in %v", time.Since(start).Round(time.Millisecond))

	k := cluster.StartReal(t, "e2e-real", 3)
	k.DumpOnFailure(t)
	t.Logf("3 real nodes Ready, cluster DNS up, in %v", k.Started.Round(time.Millisecond))
	images := k.Cluster.Images
	if images.Manager == "" {
		t.Fatal("the real nodes hold no manager image: make docker-build left no dist/images/manager")
	}
	c := k.Client(t)
	kubectl := func(args ...string) string {
		t.Helper()
		return cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], args...)
	}

	// make deploy, as the seed's step 7 runs it, retargeted to the local
	// image; the operator's default memcached and exporter images are the
	// ones the nodes hold (nothing can be pulled here).
	start = time.Now()
	deploy := exec.Command("make", "--no-print-directory", "-C", root, "deploy", "ENV=dev", "IMG="+images.Manager)
	deploy.Env = append(run.UserEnv(), "KUBECONFIG="+k.Kubeconfig)
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("make deploy: %v\n%s", err, out)
	}
	kubectl("-n", names.OperatorNamespace, "set", "env", "deployment/"+names.ManagerServiceAccount, "MEMCACHED_IMAGE="+images.Memcached, "EXPORTER_IMAGE="+images.Exporter)
	kubectl("-n", names.OperatorNamespace, "rollout", "status", "deployment/"+names.ManagerServiceAccount, "--timeout=120s")
	waitPods(t, c, names.OperatorNamespace, "control-plane=controller-manager", 1, images.Manager)
	t.Logf("operator Ready in-cluster from %s (its own probes, ServiceAccount, restricted) %v after make deploy", images.Manager, time.Since(start).Round(time.Millisecond))
	cluster.Eventually(t, waitFor, "the in-cluster manager to take the leader election lease", func() error {
		if kubectl("-n", names.OperatorNamespace, "get", "lease", "-o", "jsonpath={.items[*].spec.holderIdentity}") == "" {
			return fmt.Errorf("no holder")
		}
		return nil
	})

	// The tutorial's namespace enforces Pod Security restricted, in the
	// kubelet as well as at admission.
	kubectl("label", "namespace", "default", "pod-security.kubernetes.io/enforce=restricted", "--overwrite")

	// The tutorial's Memcached, verbatim: three memcached processes.
	start = time.Now()
	kubectl("apply", "--server-side", "-f", "deploy/samples/memcached-sample.yaml")
	cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)
	t.Logf("seed Memcached 3/3 Ready (real readiness probes) %v after apply", time.Since(start).Round(time.Millisecond))
	procs := k.Processes("memcached")
	if n := countProcs(procs); n != 3 {
		t.Fatalf("%d memcached processes run in the nodes' pods, want 3: %v", n, procs)
	}

	// set/get through the Service's DNS name, from a client pod.
	sample := cliPod{namespace: "default", server: "memcached-sample.default.svc:11211"}
	if got := memcachedCLI(t, k, c, images.Client, sample, "set", "greeting", "hello"); got != "STORED" {
		t.Fatalf("set through memcached-sample.default.svc: %q", got)
	}
	if got := memcachedCLI(t, k, c, images.Client, sample, "get", "greeting"); got != "hello" {
		t.Fatalf("get through memcached-sample.default.svc: %q, want hello", got)
	}

	// status.serverList: the three ready pods, each a memcached that
	// answers, as a client that shards keys over the list would use them.
	var servers []string
	cluster.Eventually(t, waitFor, "status.serverList to list the 3 ready pods", func() error {
		mc, err := cluster.Memcached(c, "default", "memcached-sample")
		if err != nil {
			return err
		}
		servers, _, _ = unstructured.NestedStringSlice(mc.Object, "status", "serverList")
		if len(servers) != 3 {
			return fmt.Errorf("serverList %v", servers)
		}
		return nil
	})
	for _, server := range servers {
		if version, err := memcachedVersion(server); err != nil {
			t.Errorf("serverList entry %s: %v", server, err)
		} else {
			t.Logf("serverList entry %s answers %s", server, version)
		}
	}

	// The exporter, scraped for real from the pods.
	kubectl("patch", "memcached/memcached-sample", "--type=merge", "-p", `{"spec":{"monitoring":{"exporter":{"enabled":true}}}}`)
	kubectl("rollout", "status", "deployment/memcached-sample", "--timeout=120s")
	cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)
	for _, p := range pods(t, c, "app.kubernetes.io/instance=memcached-sample") {
		if p.DeletionTimestamp != nil {
			continue // an old pod, without the exporter, on its way out
		}
		if metrics := scrape(t, "http://"+p.Status.PodIP+":9150/metrics"); !strings.Contains(metrics, "\nmemcached_up 1\n") {
			t.Errorf("pod %s's exporter does not report memcached_up 1", p.Name)
		}
	}

	// An image change rolls the pods one at a time (maxSurge 0,
	// maxUnavailable 1) to completion.
	rebuilt := strings.Replace(images.Memcached, "-debian", "-debian-rebuilt", 1)
	asRoot := strings.Replace(images.Memcached, "-debian", "-debian-root", 1)
	memcachedImage := k.NodeImage(t, images.Memcached)
	k.ImportImages(t, map[string]v1.Image{rebuilt: memcachedImage, asRoot: cluster.WithUser(t, memcachedImage, "0:0")})
	minReady, maxPods := watchRollout(t, c, func() {
		kubectl("patch", "memcached/memcached-sample", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"image":%q}}`, rebuilt))
	})
	waitPods(t, c, "default", "app.kubernetes.io/instance=memcached-sample", 3, rebuilt)
	if minReady < 2 || maxPods > 3 {
		t.Errorf("the rollout had as few as %d Ready pods and as many as %d pods: want one at a time (at least 2 Ready, at most 3)", minReady, maxPods)
	}
	t.Logf("image change: rolled one pod at a time (at least %d Ready, at most %d live pods)", minReady, maxPods)

	// kubectl drain honours the PodDisruptionBudget: with hard
	// anti-affinity the pod drained from node-1 has nowhere to go, so a
	// second drain must wait.
	kubectl("patch", "memcached/memcached-sample", "--type=merge", "-p", `{"spec":{"highAvailability":{"antiAffinity":"Hard"}}}`)
	kubectl("rollout", "status", "deployment/memcached-sample", "--timeout=120s")
	cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)
	kubectl("drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
	out, err := exec.Command(bins["kubectl"], "--kubeconfig", k.Kubeconfig, "drain", "node-2", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=15s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "disruption budget") {
		t.Errorf("a second drain was not held by the PodDisruptionBudget: %v\n%s", err, out)
	}
	if n := len(k.Processes("memcached")["node-2"]); n != 1 {
		t.Errorf("node-2 runs %d memcached processes after a drain the budget refused, want 1", n)
	}
	kubectl("uncordon", "node-1", "node-2")
	cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)

	// A pod whose image runs as root is refused by the kubelet under
	// restricted (runAsNonRoot), when no uid is set for it.
	cluster.Run(t, k.Kubeconfig, fmt.Appendf(nil, `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: runs-as-root, namespace: default}
spec: {size: 1, image: %q, podSecurity: {userID: Platform}}
`, asRoot), bins["kubectl"], "apply", "--server-side", "-f", "-")
	cluster.Eventually(t, waitFor, "the kubelet to refuse the root image", func() error {
		for _, p := range pods(t, c, "app.kubernetes.io/instance=runs-as-root") {
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "will run as root") {
					return nil
				}
			}
		}
		return fmt.Errorf("no pod refused yet")
	})
	// ...and the operator reports the kubelet's reason on the Memcached,
	// through the RBAC it ships with (pods list and watch).
	cluster.Eventually(t, waitFor, "the Memcached to report the kubelet's refusal", func() error {
		mc, err := cluster.Memcached(c, "default", "runs-as-root")
		if err != nil {
			return err
		}
		if err := cluster.MemcachedCondition(mc, "Ready", "False", "PodsFailing"); err != nil {
			return err
		}
		if err := cluster.MemcachedCondition(mc, "Stalled", "False", ""); err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		for _, raw := range conditions {
			if cond, _ := raw.(map[string]any); cond["type"] == "Degraded" {
				msg, _ := cond["message"].(string)
				if !strings.Contains(msg, "CreateContainerConfigError") || !strings.Contains(msg, "will run as root") {
					return fmt.Errorf("Degraded says %q, not the kubelet's reason", msg)
				}
				t.Logf("the Memcached reports: %s", msg)
				return nil
			}
		}
		return fmt.Errorf("no Degraded condition")
	})
	kubectl("delete", "memcached/runs-as-root", "--wait", "--timeout=60s")

	// Deleting the Memcached stops its processes.
	kubectl("delete", "memcached/memcached-sample", "--wait", "--timeout=60s")
	cluster.Eventually(t, waitFor, "the memcached processes to stop", func() error {
		if n := countProcs(k.Processes("memcached")); n > 0 {
			return fmt.Errorf("%d still run", n)
		}
		return nil
	})

	// How many keys each mode keeps through a pod replacement, a rollout
	// and scaling, with a client sharding over status.serverList.
	start = time.Now()
	rows := hitRatioOnRealNodes(t, k, c, rebuilt)
	checkHitRatios(t, rows)
	t.Logf("hit ratio of 3 modes through 4 events in %v", time.Since(start).Round(time.Second))
	if path := os.Getenv("HIT_RATIO_DOC"); path != "" && !t.Failed() {
		commit, _ := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
		if err := os.WriteFile(path, []byte(hitRatioMarkdown(rows, strings.TrimSpace(string(commit)), time.Now())), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}

	securedCacheOnRealNodes(t, k, c, images)
}

// watchRollout runs change and watches the seed's pods until the rollout
// it starts has replaced every pod: the fewest Ready pods and the most
// live (not terminating) pods seen at once. Terminating pods are not
// counted, as the Deployment controller does not count them: memcached
// gets its grace period to drain its connections.
func watchRollout(t *testing.T, c client.Client, change func()) (minReady, maxPods int) {
	t.Helper()
	before := map[string]bool{}
	for _, p := range pods(t, c, "app.kubernetes.io/instance=memcached-sample") {
		if p.DeletionTimestamp == nil {
			before[p.Name] = true
		}
	}
	change()
	minReady = len(before)
	cluster.Eventually(t, 3*waitFor, "the rollout to replace every pod", func() error {
		list := pods(t, c, "app.kubernetes.io/instance=memcached-sample")
		ready, fresh, live := 0, 0, 0
		for _, p := range list {
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if podReady(p) {
				ready++
				if !before[p.Name] {
					fresh++
				}
			}
		}
		minReady, maxPods = min(minReady, ready), max(maxPods, live)
		if fresh < len(before) || live != len(before) {
			return fmt.Errorf("%d of %d pods replaced and Ready, %d live pods", fresh, len(before), live)
		}
		return nil
	})
	return minReady, maxPods
}

func countProcs(byNode map[string][]int) int {
	n := 0
	for _, p := range byNode {
		n += len(p)
	}
	return n
}

func pods(t *testing.T, c client.Client, selector string) []corev1.Pod {
	t.Helper()
	sel, err := labelSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	if err := c.List(context.Background(), list, client.InNamespace("default"), sel); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// cliPod says where memcached-cli runs and what it talks to: its
// namespace and labels, the Service, and the Secrets it mounts (name to
// mount path).
type cliPod struct {
	namespace, server string
	labels, secrets   map[string]string
}

// memcachedCLI runs memcached-cli in a pod and returns what it printed.
func memcachedCLI(t *testing.T, k *cluster.Local, c client.Client, image string, o cliPod, args ...string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "memcached-cli-", Namespace: o.namespace, Labels: o.labels},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "cli", Image: image,
				Args: append([]string{"-server", o.server, "-retry", "30s"}, args...),
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	for secret, path := range o.secrets {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: secret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: secret, MountPath: path, ReadOnly: true})
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(ctx, pod) }()
	cluster.Eventually(t, waitFor, "memcached-cli "+strings.Join(args, " "), func() error {
		if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s", pod.Status.Phase)
		}
		return nil
	})
	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "logs", "-n", pod.Namespace, pod.Name))
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	var body string
	cluster.Eventually(t, waitFor, "a scrape of "+url, func() error {
		resp, err := http.Get(url) //nolint:gosec,noctx // the test's own pod address
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	return body
}

// TestRealNodesLeaveNoTrace proves that a cluster with real nodes, pods
// run and deleted, leaves the machine as it found it: kernel settings,
// firewall rules, mounts, cgroups, links, routes and namespaces.
func TestRealNodesLeaveNoTrace(t *testing.T) {
	before := cluster.MachineState(t)
	k, err := cluster.CreateReal("no-trace", 2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	during := cluster.MachineState(t)
	kubectl := func(args ...string) {
		t.Helper()
		bins, err := repo.Bin("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], args...)
	}
	kubectl("create", "deployment", "cache", "--image="+k.Cluster.Images.Memcached, "--replicas=2", "--port=11211")
	kubectl("expose", "deployment/cache", "--port=11211")
	kubectl("rollout", "status", "deployment/cache", "--timeout=120s")
	if during["links"] == before["links"] || during["sysctl vm/overcommit_memory"] == "" {
		t.Error("the cluster's real nodes changed nothing the state sees: the comparison below would prove nothing")
	}
	if err := k.Delete(); err != nil {
		t.Fatal(err)
	}
	after := cluster.MachineState(t)
	for kind, was := range before {
		if after[kind] != was {
			t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", kind, was, after[kind])
		}
	}
}

// memcachedVersion asks the memcached at addr for its version, over the
// text protocol.
func memcachedVersion(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("version\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return "", fmt.Errorf("answered %q to version", line)
	}
	return strings.TrimSpace(line), nil
}
