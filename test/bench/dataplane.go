package bench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// DataPlane is the real-node section of make bench: what a cache pod costs
// in memory and CPU, container by container, and what its clients see
// (throughput and latency) with each security setting and through a
// rollout of each identity. Everything runs on the local cluster's three
// real nodes, which share the machine's cores with the client.
type DataPlane struct {
	Date, Commit string
	// Memcached is the memcached the pods run (Debian's, in the node image).
	Memcached string
	Pods      []PodCost
	Full      []FullCost
	Load      []LoadResult
	Rollouts  []RolloutResult
}

// PodCost is one container of a cache pod, idle and under load: resident
// memory (VmRSS, summed over the container's processes) and CPU in
// millicores, averaged over the pods of the cache.
type PodCost struct {
	Flavor, Container            string
	IdleRSSMiB, IdleCPUMilli     float64
	LoadedRSSMiB, LoadedCPUMilli float64
}

// FullCost is memcached once its cache is full, averaged over the pods:
// its resident memory, what its items take of it (stats bytes; at most
// maxMemoryMB), and the rest, memcached's own
// memory beside its items (the hash table, grown to the items' count,
// connections, threads and, with TLS, the TLS library).
type FullCost struct {
	Flavor                     string
	RSSMiB, ItemsMiB, LimitMiB float64
	Evictions                  int64
}

// NonItemMiB is memcached's memory beside its items.
func (f FullCost) NonItemMiB() float64 { return f.RSSMiB - f.ItemsMiB }

// LoadResult is one run of `memcached-cli bench` from a client pod.
type LoadResult struct {
	Flavor string
	// Path is "pods" (the addresses of status.serverList) or "service"
	// (the Service's name, looked up in the cluster DNS).
	Path         string
	OpsPerSecond float64
	P50Micros    float64
	P99Micros    float64
	P999Micros   float64
	Errors       int
}

// RolloutResult is a client's run across a rollout of all its cache's pods.
type RolloutResult struct {
	Identity     string
	Seconds      float64
	OpsPerSecond float64
	P99Micros    float64
	MaxMicros    float64
	Errors       int
	FirstError   string
	// Rollout is how long the rollout itself took.
	Rollout time.Duration
}

// Flavors of a cache the data-plane section measures: each with the
// exporter, so that every sidecar is in the table.
var Flavors = []string{"plain", "tls", "tls-auth"}

const (
	dataPlaneNamespace = "bench"
	benchAuthUser      = "bench"
	// benchConnections each run one operation at a time: 90% gets, 10%
	// sets of 100-byte values over 10,000 keys (memcached-cli bench's
	// defaults).
	benchConnections = 8
)

// DataPlaneConfig says how long each measurement runs.
type DataPlaneConfig struct {
	Load, Rollout time.Duration
	Progress      io.Writer
}

// RunDataPlane builds the manager's image, starts a cluster with three real
// nodes, deploys the operator from that image and measures. The machine
// must be able to run real nodes (root, Linux, Debian's containerd).
func RunDataPlane(ctx context.Context, cfg DataPlaneConfig) (*DataPlane, error) {
	start := time.Now()
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: data plane: "+format+" (%s)\n", append(args, time.Since(start).Round(time.Second))...)
		}
	}
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	say("building the operator's image (make docker-build)")
	if out, err := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "docker-build").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make docker-build: %w\n%s", err, out)
	}
	workdir, err := os.MkdirTemp("", "bench-dataplane-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(workdir) }()
	say("starting a cluster with 3 real nodes")
	k, err := cluster.CreateReal("bench-dataplane", 3, workdir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := k.Delete(); err != nil {
			say("deleting the cluster: %v", err)
		}
	}()
	h, err := newDataPlaneHarness(ctx, k, root)
	if err != nil {
		return nil, err
	}
	say("deploying the operator from %s (make deploy ENV=dev)", k.Cluster.Images.Manager)
	if err := h.deployOperator(); err != nil {
		return nil, err
	}
	if err := h.prepareNamespace(); err != nil {
		return nil, err
	}
	dp := &DataPlane{Date: time.Now().UTC().Format(time.DateOnly), Commit: commit(root)}
	dp.Memcached = h.memcachedVersion()
	for _, flavor := range Flavors {
		say("cache %q: 3 pods with the exporter", flavor)
		if err := h.createCache(flavor, "Ephemeral", flavor != "plain", flavor == "tls-auth"); err != nil {
			return nil, err
		}
	}
	for _, flavor := range Flavors {
		if err := h.waitReady(flavor, 3); err != nil {
			return nil, err
		}
	}
	// The pods settle (probes, the reloader's first pass) before the idle
	// figures.
	time.Sleep(20 * time.Second)
	idle := map[string]map[string]usage{}
	for _, flavor := range Flavors {
		say("cache %q: sampling idle containers for 10s", flavor)
		if idle[flavor], err = h.sample(flavor, 10*time.Second, nil); err != nil {
			return nil, err
		}
	}
	for _, flavor := range Flavors {
		servers, err := h.serverList(flavor)
		if err != nil {
			return nil, err
		}
		say("cache %q: %v of gets and sets to the pods, %d connections", flavor, cfg.Load, benchConnections)
		var res LoadResult
		loaded, err := h.sample(flavor, cfg.Load-4*time.Second, func() error {
			var err error
			res, err = h.load(flavor, "pods", []string{"-servers", strings.Join(servers, ","), "-duration", cfg.Load.String()})
			return err
		})
		if err != nil {
			return nil, err
		}
		dp.Load = append(dp.Load, res)
		for _, container := range []string{"memcached", "reloader", "exporter"} {
			i, ok := idle[flavor][container]
			if !ok {
				continue
			}
			l := loaded[container]
			dp.Pods = append(dp.Pods, PodCost{Flavor: flavor, Container: container,
				IdleRSSMiB: i.rssMiB, IdleCPUMilli: i.cpuMilli, LoadedRSSMiB: l.rssMiB, LoadedCPUMilli: l.cpuMilli})
		}
		say("cache %q: %v through the Service's name", flavor, cfg.Load)
		if res, err = h.load(flavor, "service", []string{"-duration", cfg.Load.String()}); err != nil {
			return nil, err
		}
		dp.Load = append(dp.Load, res)
	}
	for _, flavor := range Flavors {
		say("cache %q: filling it past maxMemoryMB", flavor)
		full, err := h.fill(flavor)
		if err != nil {
			return nil, err
		}
		dp.Full = append(dp.Full, full)
	}
	for _, identity := range []string{"Ephemeral", "Stable"} {
		say("%s cache of 3: a rollout under load", identity)
		r, err := h.rollout(identity, cfg.Rollout)
		if err != nil {
			return nil, err
		}
		dp.Rollouts = append(dp.Rollouts, r)
	}
	say("done")
	return dp, nil
}

// dataPlaneHarness drives one cluster.
type dataPlaneHarness struct {
	ctx     context.Context
	k       *cluster.Local
	c       client.Client
	root    string
	kubectl string
}

func newDataPlaneHarness(ctx context.Context, k *cluster.Local, root string) (*dataPlaneHarness, error) {
	cluster.QuietClientLogs()
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: cluster.Scheme})
	if err != nil {
		return nil, err
	}
	bins, err := repo.Bin("kubectl")
	if err != nil {
		return nil, err
	}
	return &dataPlaneHarness{ctx: ctx, k: k, c: c, root: root, kubectl: bins["kubectl"]}, nil
}

func (h *dataPlaneHarness) run(args ...string) (string, error) {
	return cluster.TryRun(h.k.Kubeconfig, nil, h.kubectl, args...)
}

// deployOperator runs make deploy as the seed's step 7 does, with the
// manager image the nodes hold and their memcached and exporter images
// as the defaults.
func (h *dataPlaneHarness) deployOperator() error {
	images := h.k.Cluster.Images
	deploy := exec.CommandContext(h.ctx, "make", "--no-print-directory", "-C", h.root, "deploy", "ENV=dev", "IMG="+images.Manager)
	deploy.Env = append(run.UserEnv(), "KUBECONFIG="+h.k.Kubeconfig)
	if out, err := deploy.CombinedOutput(); err != nil {
		return fmt.Errorf("make deploy: %w\n%s", err, out)
	}
	if _, err := h.run("-n", names.OperatorNamespace, "set", "env", "deployment/"+names.ManagerServiceAccount,
		"MEMCACHED_IMAGE="+images.Memcached, "EXPORTER_IMAGE="+images.Exporter); err != nil {
		return err
	}
	_, err := h.run("-n", names.OperatorNamespace, "rollout", "status", "deployment/"+names.ManagerServiceAccount, "--timeout=180s")
	return err
}

// prepareNamespace makes the namespace, a CA, a server certificate for
// every cache's Service name (and, for Stable pods, their own names), a
// client certificate and a password file.
func (h *dataPlaneHarness) prepareNamespace() error {
	if err := h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dataPlaneNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ca, caKey, caPEM, err := newCA()
	if err != nil {
		return err
	}
	var dnsNames []string
	for _, name := range append(slices.Clone(Flavors), "roll-ephemeral", "roll-stable") {
		svc := name + "." + dataPlaneNamespace + ".svc"
		dnsNames = append(dnsNames, svc, "*."+svc)
	}
	serverCert, serverKey, err := issue(ca, caKey, "memcached", dnsNames, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	clientCert, clientKey, err := issue(ca, caKey, "bench-client", nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-server-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": serverCert, "tls.key": serverKey, "ca.crt": caPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-client-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": clientCert, "tls.key": clientKey, "ca.crt": caPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-auth"},
			Data: map[string][]byte{"auth-file": []byte(benchAuthUser + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + "\n")}},
	}
	for _, s := range secrets {
		s.Namespace = dataPlaneNamespace
		if err := h.c.Create(h.ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// createCache applies a Memcached of three pods, with the exporter, the
// identity given and TLS (client certificates required) and auth as asked.
func (h *dataPlaneHarness) createCache(name, identity string, withTLS, withAuth bool) error {
	spec := map[string]any{
		"size":       int64(3),
		"identity":   identity,
		"monitoring": map[string]any{"exporter": map[string]any{"enabled": true}},
	}
	security := map[string]any{}
	if withTLS {
		security["tls"] = map[string]any{"secretName": "bench-server-tls", "clientCertificates": "Require"}
	}
	if withAuth {
		security["auth"] = map[string]any{"secretName": "bench-auth"}
	}
	if len(security) > 0 {
		spec["security"] = security
	}
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": name, "namespace": dataPlaneNamespace},
		"spec":     spec,
	}}
	return h.c.Create(h.ctx, mc)
}

func (h *dataPlaneHarness) waitReady(name string, size int) error {
	return poll(h.ctx, 5*time.Minute, "Memcached "+name+" Ready", func() error {
		mc, err := cluster.Memcached(h.c, dataPlaneNamespace, name)
		if err != nil {
			return err
		}
		if err := cluster.MemcachedCondition(mc, "Ready", "True", ""); err != nil {
			return err
		}
		servers, _, _ := unstructured.NestedStringSlice(mc.Object, "status", "serverList")
		if len(servers) != size {
			return fmt.Errorf("serverList %v", servers)
		}
		return nil
	})
}

func (h *dataPlaneHarness) serverList(name string) ([]string, error) {
	mc, err := cluster.Memcached(h.c, dataPlaneNamespace, name)
	if err != nil {
		return nil, err
	}
	servers, _, err := unstructured.NestedStringSlice(mc.Object, "status", "serverList")
	return servers, err
}

// memcachedVersion is the version the node image's memcached reports.
func (h *dataPlaneHarness) memcachedVersion() string {
	ref := h.k.Cluster.Images.Memcached
	_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	return strings.TrimSuffix(tag, "-debian")
}

// usage is a container's resident memory and CPU, averaged over a cache's
// pods.
type usage struct{ rssMiB, cpuMilli float64 }

// sample measures each container of the cache's pods over window: CPU as
// the processes' CPU time spent in it, memory at its end. With work, the
// window starts 2 s after work does (the client's connections are up) and
// work's error, after it returns, is sample's.
func (h *dataPlaneHarness) sample(name string, window time.Duration, work func() error) (map[string]usage, error) {
	done := make(chan error, 1)
	if work != nil {
		go func() { done <- work() }()
		time.Sleep(2 * time.Second)
	}
	containers, err := h.containerPIDs(name)
	if err != nil {
		return nil, err
	}
	cpu := func() map[string]float64 {
		out := map[string]float64{}
		for c, pids := range containers {
			for _, pid := range pids {
				s, _ := proc.CPUSeconds(pid)
				out[c] += s
			}
		}
		return out
	}
	before := cpu()
	time.Sleep(window)
	after := cpu()
	pods := float64(len(containers["memcached"]))
	if pods == 0 {
		return nil, fmt.Errorf("cache %s: no memcached process found in its pods' cgroups", name)
	}
	out := map[string]usage{}
	for c, pids := range containers {
		var rss float64
		for _, pid := range pids {
			r, _ := proc.RSSMiB(pid)
			rss += r
		}
		// Per pod: a container runs one process, memcached included.
		out[c] = usage{rssMiB: rss / pods, cpuMilli: 1000 * (after[c] - before[c]) / window.Seconds() / pods}
	}
	if work != nil {
		if err := <-done; err != nil {
			return nil, err
		}
	}
	return out, nil
}

// containerPIDs finds the processes of each container of the cache's pods
// by the container's ID in their cgroup, container name to PIDs.
func (h *dataPlaneHarness) containerPIDs(name string) (map[string][]int, error) {
	var pods corev1.PodList
	if err := h.c.List(h.ctx, &pods, client.InNamespace(dataPlaneNamespace), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, s := range p.Status.ContainerStatuses {
			if _, id, ok := strings.Cut(s.ContainerID, "://"); ok {
				ids[id] = s.Name
			}
		}
	}
	out := map[string][]int{}
	for _, pid := range proc.PIDs() {
		cg := proc.Cgroups(pid)
		for id, container := range ids {
			if strings.Contains(cg, id) {
				out[container] = append(out[container], pid)
			}
		}
	}
	return out, nil
}

// load runs memcached-cli bench in a client pod against the cache (its
// Service's name, and with args the servers to use) and reads its result.
func (h *dataPlaneHarness) load(name, path string, args []string) (LoadResult, error) {
	out, err := h.client(name, append([]string{"bench", "-connections", strconv.Itoa(benchConnections)}, args...))
	if err != nil {
		return LoadResult{}, err
	}
	var r struct {
		OpsPerSecond, P50Micros, P99Micros, P999Micros, MaxMicros, Seconds float64
		Errors                                                             int
		FirstError                                                         string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return LoadResult{}, fmt.Errorf("memcached-cli bench printed %q: %w", out, err)
	}
	return LoadResult{Flavor: name, Path: path, OpsPerSecond: r.OpsPerSecond, P50Micros: r.P50Micros, P99Micros: r.P99Micros, P999Micros: r.P999Micros, Errors: r.Errors}, nil
}

// fill writes 240,000 values of 1,000 bytes over the cache's pods, about
// 80 MB to each, past the default 64 MB, so that memcached evicts, then
// reads its statistics and measures it.
func (h *dataPlaneHarness) fill(name string) (FullCost, error) {
	if _, err := h.load(name, "service", []string{"-keys", "240000", "-value-size", "1000", "-get-ratio", "0", "-duration", "5s"}); err != nil {
		return FullCost{}, err
	}
	out, err := h.client(name, []string{"stats"})
	if err != nil {
		return FullCost{}, err
	}
	// With several pods behind the name, each line is "ADDRESS NAME VALUE".
	stats := map[string]float64{}
	pods := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		pods[f[0]] = true
		if v, err := strconv.ParseFloat(f[2], 64); err == nil {
			stats[f[1]] += v
		}
	}
	if len(pods) == 0 || stats["limit_maxbytes"] == 0 {
		return FullCost{}, fmt.Errorf("cache %s: memcached-cli stats printed no statistics per pod: %q", name, out)
	}
	u, err := h.sample(name, time.Second, nil)
	if err != nil {
		return FullCost{}, err
	}
	n, mib := float64(len(pods)), float64(1<<20)
	f := FullCost{Flavor: name, RSSMiB: u["memcached"].rssMiB, ItemsMiB: stats["bytes"] / n / mib,
		LimitMiB: stats["limit_maxbytes"] / n / mib, Evictions: int64(stats["evictions"])}
	if f.Evictions == 0 {
		return f, fmt.Errorf("cache %s: no evictions after the fill (%.0f MiB of items in %.0f MiB): it is not full", name, f.ItemsMiB, f.LimitMiB)
	}
	return f, nil
}

// client runs memcached-cli with args in a pod of the namespace, with the
// client certificate and the password mounted, and returns what it
// printed on success.
func (h *dataPlaneHarness) client(cache string, args []string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-client-", Namespace: dataPlaneNamespace},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "cli", Image: h.k.Cluster.Images.Client,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bench-client-tls"}}},
				{Name: "auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bench-auth"}}},
			},
		},
	}
	flags := []string{"-server", cache + "." + dataPlaneNamespace + ".svc:11211"}
	if cache != "plain" && !strings.HasPrefix(cache, "roll-") {
		flags = append(flags, "-tls-dir", "/tls")
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
	}
	if cache == "tls-auth" {
		flags = append(flags, "-auth-file", "/auth/auth-file")
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "auth", MountPath: "/auth", ReadOnly: true})
	}
	pod.Spec.Containers[0].Args = slices.Concat(flags, args)
	if err := h.c.Create(h.ctx, pod); err != nil {
		return "", err
	}
	defer func() { _ = h.c.Delete(context.Background(), pod) }()
	if err := poll(h.ctx, 10*time.Minute, "client pod "+pod.Name, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s", pod.Status.Phase)
		}
		return nil
	}); err != nil {
		return "", err
	}
	logs, err := h.run("logs", "-n", dataPlaneNamespace, pod.Name)
	if pod.Status.Phase != corev1.PodSucceeded {
		return "", errors.Join(fmt.Errorf("memcached-cli %s failed: %s", strings.Join(args, " "), logs), err)
	}
	return strings.TrimSpace(logs), err
}

// rollout measures a client through a rollout of every pod of a plain
// cache of three: through the Service's name for Ephemeral pods (a failed
// connection looks it up again), through the pods' own names for Stable
// ones (each name follows its pod).
func (h *dataPlaneHarness) rollout(identity string, duration time.Duration) (RolloutResult, error) {
	name := "roll-" + strings.ToLower(identity)
	if err := h.createCache(name, identity, false, false); err != nil {
		return RolloutResult{}, err
	}
	if err := h.waitReady(name, 3); err != nil {
		return RolloutResult{}, err
	}
	args := []string{"bench", "-connections", strconv.Itoa(benchConnections), "-duration", duration.String()}
	if identity == "Stable" {
		var servers []string
		for i := range 3 {
			servers = append(servers, fmt.Sprintf("%s-%d.%s.%s.svc:11211", name, i, name, dataPlaneNamespace))
		}
		args = append(args, "-servers", strings.Join(servers, ","))
	}
	type outcome struct {
		out string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		out, err := h.client(name, args)
		done <- outcome{out, err}
	}()
	// The client has written its keys and runs.
	time.Sleep(duration / 6)
	started := time.Now()
	patch := fmt.Sprintf(`{"spec":{"podMetadata":{"annotations":{"bench.cache.example.com/rollout":"%d"}}}}`, started.UnixNano())
	if _, err := h.run("-n", dataPlaneNamespace, "patch", "memcached/"+name, "--type=merge", "-p", patch); err != nil {
		return RolloutResult{}, err
	}
	kind := "deployment"
	if identity == "Stable" {
		kind = "statefulset"
	}
	if _, err := h.run("-n", dataPlaneNamespace, "rollout", "status", kind+"/"+name, "--timeout=5m"); err != nil {
		return RolloutResult{}, err
	}
	took := time.Since(started)
	o := <-done
	if o.err != nil {
		return RolloutResult{}, o.err
	}
	var r struct {
		Seconds, OpsPerSecond, P99Micros, MaxMicros float64
		Errors                                      int
		FirstError                                  string
	}
	if err := json.Unmarshal([]byte(o.out), &r); err != nil {
		return RolloutResult{}, fmt.Errorf("memcached-cli bench printed %q: %w", o.out, err)
	}
	return RolloutResult{Identity: identity, Seconds: r.Seconds, OpsPerSecond: r.OpsPerSecond, P99Micros: r.P99Micros, MaxMicros: r.MaxMicros,
		Errors: r.Errors, FirstError: r.FirstError, Rollout: took}, nil
}

// poll runs check every half second until it succeeds, for at most timeout;
// the error says what it waited for and the last thing check said.
func poll(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %v for %s: %w", timeout, what, errors.Join(err, last))
	}
	return nil
}

// commit names what was measured: the commit, with -dirty when the
// working tree had changes.
func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// newCA is a self-signed CA for the bench namespace's certificates.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), err
}

// issue signs a leaf certificate with the CA.
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, dnsNames []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	var kb bytes.Buffer
	if err := pem.Encode(&kb, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kb.Bytes(), nil
}

// dataPlaneMarkdown renders the real-node section of docs/benchmarks.md.
func dataPlaneMarkdown(d DataPlane) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## What a cache pod costs\n\n")
	w("Measured %s at %s, on the local cluster's three real nodes (which share the machine's cores with the client), by `make bench`'s\n", d.Date, d.Commit)
	w("real-node section: caches of three pods, each with the exporter, running memcached %s (Debian's, in the node image), the\n", d.Memcached)
	w("exporter from `bin/` and the reloader of this commit. Resident memory (VmRSS) and CPU are read from `/proc` for the processes in\n")
	w("each container's cgroup and averaged over the three pods. *Idle*: 20 s after the cache is Ready, CPU over 10 s. *Under load*: during\n")
	w("the client run of the table below that goes to the pods.\n\n")
	w("| cache | container | idle RSS | idle CPU | under load RSS | under load CPU |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, p := range d.Pods {
		w("| %s | %s | %.1f MiB | %.1f m | %.1f MiB | %.0f m |\n", p.Flavor, p.Container, p.IdleRSSMiB, p.IdleCPUMilli, p.LoadedRSSMiB, p.LoadedCPUMilli)
	}
	w("\n")
	w("| target | measured | |\n| --- | ---: | --- |\n")
	var reloader float64
	for _, p := range d.Pods {
		if p.Container == "reloader" {
			reloader = max(reloader, p.IdleRSSMiB, p.LoadedRSSMiB)
		}
	}
	w("| the reloader ≤ 8 MiB resident per pod | %.1f MiB (largest, idle or under load) | %s |\n", reloader, met(reloader > 0 && reloader <= 8))
	for _, flavor := range Flavors {
		side, own := 0.0, 0.0
		for _, p := range d.Pods {
			if p.Flavor == flavor && p.Container != "memcached" {
				side += p.IdleRSSMiB
			}
		}
		for _, f := range d.Full {
			if f.Flavor == flavor {
				own = f.NonItemMiB()
			}
		}
		if own == 0 {
			w("| %s: the sidecars together ≤ memcached's own memory beside its items, full at the default `maxMemoryMB` | %.1f MiB vs not measured | **not measured** |\n", flavor, side)
			continue
		}
		w("| %s: the sidecars together ≤ memcached's own memory beside its items, full at the default `maxMemoryMB` | %.1f MiB vs %.1f MiB | %s |\n", flavor, side, own, met(side <= own))
	}
	if len(d.Full) > 0 {
		w("\nmemcached full: each cache filled with 1,000-byte values past its default 64 MB (`maxMemoryMB`), until it evicts. *items*:\n")
		w("what the items take (`stats bytes`); *beside the items*: the rest of its resident memory (slab pages' unused chunk space, the hash table, grown to\n")
		w("the items' count, connections, threads and, with TLS, OpenSSL).\n\n")
		w("| cache | memcached RSS | items | beside the items | evictions |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, f := range d.Full {
			w("| %s | %.1f MiB | %.1f MiB of %.0f | %.1f MiB | %d |\n", f.Flavor, f.RSSMiB, f.ItemsMiB, f.LimitMiB, f.NonItemMiB(), f.Evictions)
		}
	}
	w("\n## Data plane\n\n")
	w("A client pod runs `memcached-cli bench` (`hack/cmd/memcached-cli`): every key written once, then %d connections, each one operation\n", benchConnections)
	w("at a time, 90%% gets and 10%% sets of 100-byte values over 10,000 keys, each operation timed by the client. *pods*: the connections go\n")
	w("round-robin to the addresses of `status.serverList`; *service*: to what the Service's name resolves to in the cluster DNS. The\n")
	w("Service is headless (memcached clients pick the pod for each key themselves), so both reach the pods directly, without a proxy;\n")
	w("TLS requires a client certificate; auth sends `set auth` once per connection. Ratios are to the plain cache through the same path.\n\n")
	w("| cache | path | operations/s | × plain | p50 | p99 | × plain | p99.9 | errors |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range d.Load {
		base := l
		for _, o := range d.Load {
			if o.Flavor == "plain" && o.Path == l.Path {
				base = o
			}
		}
		w("| %s | %s | %.0f | %.2f× | %s | %s | %.2f× | %s | %d |\n", l.Flavor, l.Path, l.OpsPerSecond, l.OpsPerSecond/base.OpsPerSecond,
			micros(l.P50Micros), micros(l.P99Micros), l.P99Micros/base.P99Micros, micros(l.P999Micros), l.Errors)
	}
	w("\n## A client through a rollout\n\n")
	w("The same client against a plain cache of three while every pod is replaced (a change to `spec.podMetadata`): for Ephemeral pods\n")
	w("through the Service's name, which a failed connection looks up again; for Stable pods through their own names (`NAME-0.NAME...`),\n")
	w("which follow each pod. An error is an operation that failed (its connection closed by a pod that stopped) and was retried on a new\n")
	w("connection. [keeping-keys.md](keeping-keys.md) says what the drain and Stable identities do for clients.\n\n")
	w("| identity | rollout took | client ran | operations/s | p99 | max | errors | first error |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range d.Rollouts {
		w("| %s | %s | %.0f s | %.0f | %s | %s | %d | %s |\n", r.Identity, round(r.Rollout), r.Seconds, r.OpsPerSecond, micros(r.P99Micros), micros(r.MaxMicros), r.Errors, r.FirstError)
	}
	w("\n")
	return b.String()
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func micros(us float64) string { return round(time.Duration(us * float64(time.Microsecond))) }
