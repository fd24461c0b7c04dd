package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/hack/chart"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
)

const (
	crdName     = "memcacheds.cache.example.com"
	helmTimeout = 2 * time.Minute
)

// helmClient is Helm's SDK configured as `helm --kubeconfig K -n NS`.
func helmClient(t *testing.T, kubeconfig string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	ns := namespace
	flags.Namespace = &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// hookNode is a node name no Node has, so neither a kubelet nor kwok
// (which plays the kubelet of every Node of the cluster) acts on the
// uninstall hook's pod bound to it; the pod garbage collector would only
// delete it after its 40 s quarantine for pods on missing nodes.
const hookNode = "test-kubelet"

// hookPodsOnTestNode binds the hook Job's pod to hookNode: kwok, whose
// nodes run no containers, would otherwise mark it completed at once and
// Helm would go on before its command ran. The test plays the kubelet for
// that pod and runs the command itself. It is a Helm post-renderer, which
// Helm 4 applies to hooks too; it changes nothing else.
type hookPodsOnTestNode struct{}

func (hookPodsOnTestNode) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	nodes, err := (&kio.ByteReader{Reader: in, OmitReaderAnnotations: true}).Read()
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.GetKind() != "Job" {
			continue
		}
		if err := n.PipeE(yaml.LookupCreate(yaml.MappingNode, "spec", "template", "spec"), yaml.SetField("nodeName", yaml.NewStringRNode(hookNode))); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	err = kio.ByteWriter{Writer: &out}.Write(nodes)
	return &out, err
}

// The chart's whole life on a kwok cluster with Helm's v4 SDK, each step
// ending where a user expects: install (the manager Ready, the seed CR
// Ready), upgrade (replicas and log level change, Memcacheds untouched),
// rollback, uninstall (Memcacheds deleted first by the pre-delete hook,
// the CRD kept), then a reinstall from the OCI registry with the helm CLI.
func TestChartLifecycle(t *testing.T) {
	bins, err := repo.Bin("kubectl", "manager", "helm", "registry")
	if err != nil {
		t.Fatal(err)
	}
	k := cluster.StartLocal(t, "helm", 2)
	k.DumpOnFailure(t)
	c := k.Client(t)
	cfg := helmClient(t, k.Kubeconfig)
	ch := load(t, chartDir(t))
	ctx := context.Background()

	// install
	start := time.Now()
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, namespace, true
	install.WaitStrategy, install.Timeout = kube.StatusWatcherStrategy, helmTimeout
	install.PostRenderer = hookPodsOnTestNode{}
	if _, err := install.RunWithContext(ctx, ch, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("installed and Ready in %v", time.Since(start).Round(time.Millisecond))
	d := deployment(t, c, namespace, names.ManagerDeployment)
	if d.Status.ReadyReplicas != 1 {
		t.Fatalf("the manager has %d ready replicas after a waited install", d.Status.ReadyReplicas)
	}
	// Fake nodes run no containers: the manager runs here, as the chart's
	// ServiceAccount, with the chart's RBAC.
	manager := cluster.StartManager(t, cluster.ImpersonatingKubeconfig(t, k.Kubeconfig, namespace, names.ManagerServiceAccount),
		"--leader-elect", "--leader-election-namespace="+namespace, "--metrics-bind-address=0")
	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", "deploy/samples/memcached-sample.yaml")
	cluster.WaitMemcachedReady(t, c, "default", "memcached-sample", 3)
	before := snapshot(t, c)

	// upgrade: two managers (leader election stays on) at debug level
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.WaitStrategy, upgrade.Timeout = namespace, kube.StatusWatcherStrategy, helmTimeout
	upgrade.PostRenderer = hookPodsOnTestNode{}
	if _, err := upgrade.RunWithContext(ctx, releaseName, ch, map[string]any{"manager": map[string]any{"replicas": 2, "logLevel": "debug"}}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	d = deployment(t, c, namespace, names.ManagerDeployment)
	if *d.Spec.Replicas != 2 || d.Status.ReadyReplicas != 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--zap-log-level=debug") {
		t.Errorf("after the upgrade: %d replicas (%d ready), args %q", *d.Spec.Replicas, d.Status.ReadyReplicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("the upgrade touched the Memcached or its objects:\nbefore %s\nafter  %s", before, after)
	}

	// rollback to the install
	rollback := action.NewRollback(cfg)
	rollback.Version, rollback.WaitStrategy, rollback.Timeout = 1, kube.StatusWatcherStrategy, helmTimeout
	if err := rollback.Run(releaseName); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	d = deployment(t, c, namespace, names.ManagerDeployment)
	if *d.Spec.Replicas != 1 || slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--zap-log-level") }) {
		t.Errorf("after the rollback: %d replicas, args %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	history, err := action.NewHistory(cfg).Run(releaseName)
	if err != nil || len(history) != 3 {
		t.Errorf("want 3 revisions (install, upgrade, rollback), got %d: %v", len(history), err)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("the rollback touched the Memcached or its objects:\nbefore %s\nafter  %s", before, after)
	}

	// uninstall: the pre-delete hook deletes every Memcached while the
	// operator still runs, so that it releases them; the CRD stays.
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy, uninstall.Timeout = kube.StatusWatcherStrategy, helmTimeout
	done := make(chan error, 1)
	go func() { _, err := uninstall.Run(releaseName); done <- err }()
	runHookPod(t, c, k.Kubeconfig, bins["manager"], done)
	if err := <-done; err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the CRD is gone after uninstall with crds.keep: %v", err)
	}
	if _, err := cluster.Memcached(c, "default", "memcached-sample"); !apierrors.IsNotFound(err) {
		t.Errorf("the Memcached survived the uninstall: %v", err)
	}
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}} {
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: names.ManagerDeployment}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s survived the uninstall: %v", o, names.ManagerDeployment, err)
		}
	}
	if err := manager.Stop(); err != nil {
		t.Errorf("stop the manager: %v", err)
	}

	t.Run("reinstall from an OCI registry with the helm CLI", func(t *testing.T) {
		reinstallFromOCI(t, k.Kubeconfig, bins["helm"])
		cluster.Eventually(t, helmTimeout, "the manager Deployment", func() error {
			return c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: names.ManagerDeployment}, &appsv1.Deployment{})
		})
	})
}

// snapshot is what must not change when only the operator changes: the
// Memcached's identity, generation and Ready condition, and its
// Deployment's identity and generation.
func snapshot(t *testing.T, c client.Client) string {
	t.Helper()
	mc, err := cluster.Memcached(c, "default", "memcached-sample")
	if err != nil {
		t.Fatal(err)
	}
	d := deployment(t, c, "default", "memcached-sample")
	return fmt.Sprintf("Memcached %s generation %d ready=%v; Deployment %s generation %d",
		mc.GetUID(), mc.GetGeneration(), cluster.MemcachedCondition(mc, "Ready", "True", "") == nil, d.UID, d.Generation)
}

func deployment(t *testing.T, c client.Client, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// runHookPod waits for the uninstall hook's pod and does what a kubelet
// on hookNode would: runs its container's command (bin/manager is the image's
// entrypoint) as the pod's ServiceAccount, then records the exit in the
// pod's status, from which the Job controller completes the Job.
func runHookPod(t *testing.T, c client.Client, kubeconfig, manager string, uninstalled chan error) {
	t.Helper()
	ctx := context.Background()
	var pod corev1.Pod
	cluster.Eventually(t, helmTimeout, "the uninstall hook's pod to run", func() error {
		select {
		case err := <-uninstalled:
			t.Fatalf("helm uninstall ended (%v) before its hook ran", err)
		default:
		}
		jobs := &batchv1.JobList{}
		if err := c.List(ctx, jobs, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(jobs.Items) != 1 {
			return fmt.Errorf("%d Jobs", len(jobs.Items))
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"job-name": jobs.Items[0].Name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		pod = pods.Items[0]
		return nil
	})
	container := pod.Spec.Containers[0]
	start := time.Now()
	cmd := exec.Command(manager, append(container.Args,
		"--kubeconfig="+cluster.ImpersonatingKubeconfig(t, kubeconfig, namespace, pod.Spec.ServiceAccountName))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hook's command %q: %v\n%s", container.Args, err, out)
	}
	t.Logf("the hook's command %q deleted the Memcacheds in %v", container.Args, time.Since(start).Round(time.Millisecond))
	now := metav1.Now()
	cluster.Eventually(t, 10*time.Second, "the hook's pod to record its exit", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(&pod), &pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: container.Name, Image: container.Image, ImageID: container.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(start), FinishedAt: now}},
		}}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now}}
		return c.Status().Update(ctx, &pod)
	})
}

// reinstallFromOCI is the user's path with the helm CLI: package the
// chart, push it to an OCI registry, pull it back, and install it from
// there. The install adopts the CRD the previous uninstall kept.
func reinstallFromOCI(t *testing.T, kubeconfig, helm string) {
	t.Helper()
	reg := registry.Start(t)
	home := t.TempDir()
	env := []string{"KUBECONFIG=" + kubeconfig, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("helm %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	dist := t.TempDir()
	version := load(t, chartDir(t)).Metadata.Version
	run("package", chartDir(t), "--destination", dist)
	pkg := filepath.Join(dist, chart.Name+"-"+version+".tgz")
	ref := "oci://" + reg.Host + "/charts"
	pushed := run("push", pkg, ref, "--plain-http")
	if !strings.Contains(pushed, "Digest: sha256:") {
		t.Errorf("helm push printed no digest")
	}
	pulled := t.TempDir()
	run("pull", ref+"/"+chart.Name, "--version", version, "--plain-http", "--destination", pulled)
	want, _ := os.ReadFile(pkg)
	got, err := os.ReadFile(filepath.Join(pulled, chart.Name+"-"+version+".tgz"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the pulled chart differs from the pushed one (%v)", err)
	}
	run("install", releaseName, ref+"/"+chart.Name, "--version", version, "--plain-http",
		"--namespace", namespace, "--create-namespace", "--wait", "--timeout", "2m")
	status := run("status", releaseName, "--namespace", namespace)
	if !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status: not deployed")
	}
}
