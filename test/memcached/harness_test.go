// Package memcached_test is the real-memcached tier: the pod templates the
// operator writes (read back from a live apiserver, never from the
// builders) are admitted as Pods in a namespace enforcing Pod Security
// "restricted", and their containers run for real: Debian's memcached with
// exactly the operator's arguments (port remapped, loopback only, the pod's
// uid), answering a memcached client library, and bin/memcached_exporter
// with the sidecar's arguments reporting memcached_up 1.
//
//	make test-memcached
package memcached_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

const (
	// Objects the generated specs may refer to; they exist in the harness.
	priorityClass      = "cache-critical"
	cacheServiceAcount = "cache"
	// reloaderImage is what the harness's operator writes for the reloader
	// sidecar; the tests run bin/reloader in its place.
	reloaderImage = "registry.example.com/memcached-operator:test"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// harness is a live apiserver with the operator installed from
// deploy/install and bin/manager running as its ServiceAccount, and a
// namespace that enforces Pod Security "restricted".
type harness struct {
	env       *cluster.Envtest
	c         client.Client
	namespace string
	// security is set once the namespace holds the Secrets generated specs
	// refer to (withSecuritySecrets).
	security *securityFixture
}

func startHarness(t *testing.T, namespace string) *harness {
	t.Helper()
	if _, err := memcached.Binary(); err != nil {
		t.Fatal(err)
	}
	bins, err := repo.Bin("kubectl", "manager", "memcached_exporter")
	if err != nil {
		t.Fatal(err)
	}
	env := cluster.StartEnvtest(t)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-k", "deploy/install")
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com")
	ctx := context.Background()
	if err := cluster.RestrictedNamespace(ctx, c, namespace); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cacheServiceAcount, Namespace: namespace}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClass}, Value: 1000},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cluster.StartManager(t, cluster.ImpersonatingKubeconfig(t, env.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount),
		"--metrics-bind-address=0", "--max-concurrent-reconciles=8", "--reloader-image="+reloaderImage)
	return &harness{env: env, c: c, namespace: namespace}
}

// waitDeployment waits for the operator to apply the Memcached's Deployment
// without being stalled or degraded, and returns the Deployment as the
// apiserver holds it.
func (h *harness) waitDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, timeout time.Duration) (*appsv1.Deployment, error) {
	w, err := h.waitWorkload(ctx, mc, timeout)
	if err != nil {
		return nil, err
	}
	d, ok := w.(*appsv1.Deployment)
	if !ok {
		return nil, fmt.Errorf("%s runs as a %T, not a Deployment", mc.Name, w)
	}
	return d, nil
}

// waitWorkload waits for the operator to apply the Memcached's workload, a
// Deployment or (identity Stable) a StatefulSet, without being stalled or
// degraded, and returns it as the apiserver holds it.
func (h *harness) waitWorkload(ctx context.Context, mc *cachev1alpha1.Memcached, timeout time.Duration) (client.Object, error) {
	deadline := time.Now().Add(timeout)
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	var last error
	for time.Now().Before(deadline) {
		cur := &cachev1alpha1.Memcached{}
		if err := h.c.Get(ctx, key, cur); err != nil {
			return nil, err
		}
		for _, condType := range []string{cachev1alpha1.ConditionStalled, cachev1alpha1.ConditionDegraded} {
			if c := meta.FindStatusCondition(cur.Status.Conditions, condType); c != nil && c.Status == metav1.ConditionTrue {
				return nil, fmt.Errorf("%s: %s: %s", condType, c.Reason, c.Message)
			}
		}
		var w client.Object = &appsv1.Deployment{}
		if cur.GetIdentity() == cachev1alpha1.IdentityStable {
			w = &appsv1.StatefulSet{}
		}
		last = h.c.Get(ctx, key, w)
		if last == nil && cur.Status.ObservedGeneration == cur.Generation {
			return w, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("no Deployment or StatefulSet after %v: %w", timeout, last)
}

// create creates mc and returns the Deployment the operator writes for
// it, failing the test if it stalls.
func (h *harness) create(t *testing.T, mc *cachev1alpha1.Memcached) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	if err := h.c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	d, err := h.waitDeployment(ctx, mc, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// podRun is what running one pod template found.
type podRun struct {
	clamped  bool
	exporter bool
	tls      bool
	auth     bool
	reloader bool
	warm     bool
}

// runPodTemplate admits a Pod from the workload's template, then runs its
// containers for real and checks that they work as the spec asked. The
// claims of a StatefulSet's claim templates are local directories; with
// warm restart, memcached must keep its items through the real reloader's
// warm stop and a start on the same memory file.
func (h *harness) runPodTemplate(ctx context.Context, workload client.Object) (podRun, error) {
	var res podRun
	var template corev1.PodTemplateSpec
	var claims []corev1.PersistentVolumeClaim
	switch w := workload.(type) {
	case *appsv1.Deployment:
		template = w.Spec.Template
	case *appsv1.StatefulSet:
		template, claims = *w.Spec.Template.DeepCopy(), w.Spec.VolumeClaimTemplates
		// The StatefulSet controller gives pod i a volume per claim
		// template, bound to the claim TEMPLATE-NAME-i.
		for _, claim := range claims {
			template.Spec.Volumes = append(template.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + w.Name + "-0"},
			}})
		}
	default:
		return res, fmt.Errorf("%T is no workload", workload)
	}
	if err := cluster.PodAdmitted(ctx, h.c, workload.GetNamespace(), template); err != nil {
		return res, err
	}
	pod := template.Spec
	main := container(pod, "memcached")
	if main == nil {
		return res, fmt.Errorf("no memcached container in %s", workload.GetName())
	}
	if len(main.Command) > 0 {
		return res, fmt.Errorf("container command %q: the official image's entrypoint runs memcached with the args", main.Command)
	}
	id := memcached.UnprivilegedIdentity(pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup)
	access, cleanup, err := h.secretVolumes(pod, main)
	if err != nil {
		return res, err
	}
	defer cleanup()
	claimed, err := claimVolumes(claims, main, id, access)
	defer func() { _ = os.RemoveAll(claimed) }()
	if err != nil {
		return res, err
	}
	srv, err := memcached.TryStart(main.Args, id, freePort(), access)
	if err != nil {
		return res, err
	}
	res.tls, res.auth = slices.Contains(main.Args, "-Z"), slices.Contains(main.Args, "-Y")
	defer func() { _ = srv.Stop() }()
	res.clamped = srv.Clamped
	settings, err := checkSettings(srv, main.Args)
	if err != nil {
		return res, err
	}
	if err := srv.SetGet(100); err != nil {
		return res, err
	}
	// An item just below the largest size -I allows must be stored, where
	// the cache has room for a few of them.
	itemMax, _ := strconv.ParseInt(settings["item_size_max"], 10, 64)
	maxBytes, _ := strconv.ParseInt(settings["maxbytes"], 10, 64)
	if itemMax <= 8<<20 && maxBytes >= 4*itemMax {
		if err := srv.SetGet(int(itemMax) - 2048); err != nil {
			return res, fmt.Errorf("an item just below -I: %w", err)
		}
	}
	// What listens in the pod, by port: memcached's listeners, then the
	// reloader's (with auth, the exporter scrapes through it).
	listening := map[int]string{}
	for podPort, local := range srv.Ports {
		listening[podPort] = "127.0.0.1:" + strconv.Itoa(local)
	}
	var reloader *proc.Process
	if r := container(pod, "reloader"); r != nil {
		res.reloader = true
		p, listeners, err := startReloader(r, access.Mounts, srv.PlainAddr)
		if err != nil {
			return res, err
		}
		defer func() { _ = p.Stop() }()
		maps.Copy(listening, listeners)
		reloader = p
	}
	if exp := container(pod, "exporter"); exp != nil {
		res.exporter = true
		target, err := exporterTarget(exp.Args, listening)
		if err != nil {
			return res, err
		}
		e, err := memcached.TryStartExporter(exp.Args, target, freePort())
		if err != nil {
			return res, err
		}
		defer func() { _ = e.Stop() }()
		if err := waitUp(e); err != nil {
			return res, err
		}
	}
	if slices.Contains(main.Args, "-e") {
		res.warm = true
		if err := warmRestart(srv, reloader, main.Args, id, access); err != nil {
			return res, fmt.Errorf("warm restart: %w", err)
		}
	}
	return res, nil
}

// claimVolumes gives each claim template mounted in the memcached
// container a local directory, owned by memcached's user as the pod's
// fsGroup makes the claim, under one temporary directory it returns.
func claimVolumes(claims []corev1.PersistentVolumeClaim, main *corev1.Container, id memcached.Identity, access *memcached.Access) (string, error) {
	if len(claims) == 0 {
		return "", nil
	}
	// On a RAM disk, as warm restart's memory file must be: on a disk
	// memcached writes the whole file out before it serves.
	root, err := os.MkdirTemp("/dev/shm", "claims-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return root, err
	}
	for _, claim := range claims {
		for _, m := range main.VolumeMounts {
			if m.Name != claim.Name {
				continue
			}
			dir := filepath.Join(root, claim.Name)
			if err := os.Mkdir(dir, 0o770); err != nil {
				return root, err
			}
			if os.Geteuid() == 0 {
				if err := os.Chown(dir, int(id.UID), int(id.GID)); err != nil {
					return root, err
				}
			}
			access.Mounts[m.MountPath] = dir
		}
	}
	return root, nil
}

// warmRestart stops the pod as the kubelet would, for a pod with warm
// restart: SIGTERM to the real reloader, which (its drain cut to nothing)
// sends memcached SIGUSR1 and waits for it to save its memory file and
// exit. A memcached started again on the same file must serve the key
// set before.
func warmRestart(srv *memcached.Server, reloader *proc.Process, containerArgs []string, id memcached.Identity, access *memcached.Access) error {
	if reloader == nil {
		return errors.New("memcached runs with -e but the pod has no reloader to make it save the file")
	}
	const size = 1000
	if err := srv.SetGet(size); err != nil {
		return err
	}
	if err := reloader.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := srv.Wait(10 * time.Second); err != nil {
		return fmt.Errorf("memcached did not exit after the reloader's warm stop: %w\nreloader:\n%s", err, reloader.Output())
	}
	if err := reloader.Wait(10 * time.Second); err != nil {
		return fmt.Errorf("the reloader did not exit: %w\n%s", err, reloader.Output())
	}
	if !strings.Contains(reloader.Output(), "memcached saved its memory file and exited") {
		return fmt.Errorf("the reloader did not report the save:\n%s", reloader.Output())
	}
	// memcached refuses a memory file saved in the second it starts again
	// in (it takes that for a clock gone backwards); a pod takes longer.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	again, err := memcached.TryStart(containerArgs, id, freePort(), access)
	if err != nil {
		return err
	}
	defer func() { _ = again.Stop() }()
	if err := again.Get(fmt.Sprintf("probe-%d", size), size); err != nil {
		return fmt.Errorf("after the restart: %w\nmemcached's first run:\n%s\nits second run:\n%s", err, srv.Output(), again.Output())
	}
	return nil
}

// waitUp waits up to 5 seconds for the exporter to report memcached_up 1.
func waitUp(e *memcached.Exporter) error {
	var metrics string
	var err error
	for range 50 {
		if metrics, err = e.Metrics(); err == nil && strings.Contains(metrics, "\nmemcached_up 1\n") {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("the exporter does not report memcached_up 1: %w", err)
	}
	return fmt.Errorf("the exporter does not report memcached_up 1:\n%s", grep(metrics, "memcached_up"))
}

// exporterTarget is the local address of what the exporter's
// --memcached.address reaches in the pod.
func exporterTarget(args []string, listening map[int]string) (string, error) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--memcached.address="); ok {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return "", fmt.Errorf("exporter --memcached.address=%s: %w", v, err)
			}
			n, _ := strconv.Atoi(port)
			if addr, ok := listening[n]; ok {
				return addr, nil
			}
			return "", fmt.Errorf("exporter --memcached.address=%s: nothing in the pod listens on port %d", v, n)
		}
	}
	return "", fmt.Errorf("exporter %q: no --memcached.address", args)
}

// checkSettings compares `stats settings` with the flags the operator set:
// memcached must run with what the spec asked for, not merely start.
func checkSettings(srv *memcached.Server, containerArgs []string) (map[string]string, error) {
	got, err := srv.Settings()
	if err != nil {
		return nil, err
	}
	flag := func(name string) string {
		if i := slices.Index(srv.Args, name); i >= 0 && i+1 < len(srv.Args) {
			return srv.Args[i+1]
		}
		return ""
	}
	want := map[string]string{
		"tcpport":       flag("-p"),
		"maxconns":      flag("-c"),
		"num_threads":   flag("-t"),
		"udpport":       "0",
		"inter":         flag("-l"),
		"item_size_max": "1048576",
		"verbosity":     "0",
	}
	mb, err := strconv.ParseInt(flag("-m"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("-m %q: %w", flag("-m"), err)
	}
	want["maxbytes"] = strconv.FormatInt(mb<<20, 10)
	if v := flag("-I"); v != "" {
		want["item_size_max"] = strconv.FormatInt(memcachedBytes(v), 10)
	}
	for _, a := range containerArgs {
		if a == "-v" || a == "-vv" {
			want["verbosity"] = strconv.Itoa(len(a) - 1)
		}
	}
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s=%s (want %s)", k, got[k], v))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return nil, fmt.Errorf("memcached runs with other settings than the flags %q say: %s", containerArgs, strings.Join(diffs, ", "))
	}
	return got, nil
}

// memcachedBytes reads memcached's -I syntax (k and m are binary).
func memcachedBytes(v string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "k"):
		mult, v = 1<<10, strings.TrimSuffix(v, "k")
	case strings.HasSuffix(v, "m"):
		mult, v = 1<<20, strings.TrimSuffix(v, "m")
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n * mult
}

func container(pod corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}

func grep(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// freePort is run.FreePort for code that has no *testing.T at hand.
func freePort() int { return run.FreePortOrZero() }

// versions names what the tier ran, for the test log.
func versions(t *testing.T) string {
	t.Helper()
	bin, _ := memcached.Binary()
	mc, _ := exec.Command(bin, "-V").Output()
	bins, _ := repo.Bin("memcached_exporter")
	exp, _ := exec.Command(bins["memcached_exporter"], "--version").CombinedOutput()
	first, _, _ := strings.Cut(string(exp), "\n")
	return fmt.Sprintf("%s (%s), %s", strings.TrimSpace(string(mc)), bin, first)
}
