// Command manager runs the Memcached operator: the Memcached controller,
// a metrics endpoint served over HTTPS behind Kubernetes authentication and
// authorization, health probes, and optional leader election.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/buildinfo"
	"github.com/example/memcached-operator/operator/internal/controller"
	"github.com/example/memcached-operator/operator/internal/metrics"
	"github.com/example/memcached-operator/operator/internal/metricsauth"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Default images. The memcached tag is pinned (never "latest") so that an
// operator release decides which memcached runs; Memcacheds that set
// spec.image are not affected.
const (
	defaultMemcachedImage = "memcached:1.6.39-alpine"
	// v0.14.4: the newest release the Go module proxy serves, so the newest
	// the repository's tests can run (make tools builds it into bin/).
	defaultExporterImage = "quay.io/prometheus/memcached-exporter:v0.14.4"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
}

type options struct {
	metricsAddr             string
	secureMetrics           bool
	enableHTTP2             bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	maxConcurrentReconciles int
	watchNamespaces         string
	memcachedImage          string
	exporterImage           string
	reloaderImage           string
	kubeAPIQPS              float64
	kubeAPIBurst            int
	gracefulShutdownTimeout time.Duration
	memoryLimitRatio        float64
	showVersion             bool
	deleteMemcacheds        bool
	deleteMemcachedsTimeout time.Duration
	zap                     zap.Options
}

func main() {
	opts := parseFlags(flag.CommandLine, os.Args[1:])
	if opts.showVersion {
		fmt.Println(buildinfo.Version(version))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))
	if opts.deleteMemcacheds {
		if err := deleteMemcacheds(opts); err != nil {
			ctrl.Log.WithName("uninstall").Error(err, "Memcacheds not deleted")
			os.Exit(1)
		}
		return
	}
	if err := run(opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager exited")
		os.Exit(1)
	}
}

func parseFlags(fs *flag.FlagSet, args []string) *options {
	o := &options{}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to: :8443 for HTTPS, :8080 with --metrics-secure=false, 0 to disable.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, allowing only callers authorized to get /metrics (TokenReview + SubjectAccessReview).")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Enable HTTP/2 for the metrics server. Off by default because of the HTTP/2 Rapid Reset and Stream Cancellation CVEs.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address to serve Go's /debug/pprof on, for profiling; empty (the default) disables it.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader through a Lease, so that only one of several manager replicas reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease. Defaults to the pod's namespace; required out of cluster with --leader-elect.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 16,
		"Number of Memcacheds reconciled in parallel. Reconciles mostly wait on the apiserver; docs/benchmarks.md measures the default.")
	fs.StringVar(&o.watchNamespaces, "watch-namespaces", os.Getenv("WATCH_NAMESPACES"),
		"Comma-separated namespaces to watch (env WATCH_NAMESPACES). Empty watches all namespaces.")
	fs.StringVar(&o.memcachedImage, "memcached-image", envOr("MEMCACHED_IMAGE", defaultMemcachedImage),
		"Image for Memcacheds that do not set spec.image (env MEMCACHED_IMAGE).")
	fs.StringVar(&o.exporterImage, "exporter-image", envOr("EXPORTER_IMAGE", defaultExporterImage),
		"Image of the memcached_exporter sidecar when spec.monitoring.exporter.image is empty (env EXPORTER_IMAGE).")
	fs.StringVar(&o.reloaderImage, "reloader-image", os.Getenv("RELOADER_IMAGE"),
		"Image of the reloader sidecar of Memcacheds with spec.security (env RELOADER_IMAGE): the operator's own image, which holds it as /reloader. Empty in a pod (POD_NAME and POD_NAMESPACE set) means the image of the pod's manager container.")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 0,
		"Client-side limit of requests per second to the apiserver. 0 keeps controller-runtime's default: no client-side limit, leaving throttling to the apiserver's API Priority and Fairness, which protects it from every client at once.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0,
		"Client-side burst of requests to the apiserver above --kube-api-qps. 0 means twice --kube-api-qps.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", 15*time.Second,
		"How long in-flight reconciles may take to finish after SIGTERM, before the leader Lease is released. The pod's terminationGracePeriodSeconds must be longer.")
	fs.Float64Var(&o.memoryLimitRatio, "memory-limit-ratio", 0.9,
		"Fraction of the container's memory limit (env MEMORY_LIMIT, in bytes, from the downward API) to use as the Go runtime's soft memory limit when GOMEMLIMIT is not set; the rest is headroom for what the Go heap does not count. 0 disables.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	fs.BoolVar(&o.deleteMemcacheds, "delete-memcacheds", false,
		"Do not run the operator: delete every Memcached (of --watch-namespaces, else all) and wait until the running operator has released them, then exit. Run before removing the operator (the Helm chart's pre-delete hook).")
	fs.DurationVar(&o.deleteMemcachedsTimeout, "delete-memcacheds-timeout", 5*time.Minute,
		"How long --delete-memcacheds waits for the Memcacheds to go.")
	o.zap = zap.Options{Development: false}
	o.zap.BindFlags(fs)
	// Parse errors exit 2 with usage, as the flag package does by default.
	_ = fs.Parse(args)
	return o
}

func run(o *options) error {
	setupLog := ctrl.Log.WithName("setup")
	setupLog.Info("starting memcached-operator", "version", buildinfo.Version(version),
		"memcachedImage", o.memcachedImage, "exporterImage", o.exporterImage,
		"watchNamespaces", o.watchNamespaces, "maxConcurrentReconciles", o.maxConcurrentReconciles)

	if limit, ok := softMemoryLimit(os.Getenv("GOMEMLIMIT"), os.Getenv("MEMORY_LIMIT"), o.memoryLimitRatio); ok {
		debug.SetMemoryLimit(limit)
		setupLog.Info("set the Go runtime's soft memory limit", "bytes", limit, "ratio", o.memoryLimitRatio)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}
	applyRateLimits(cfg, o.kubeAPIQPS, o.kubeAPIBurst)
	cfg.UserAgent = "memcached-operator/" + buildinfo.Version(version)

	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = metricsauth.WithAuthenticationAndAuthorization
	}

	ctx := ctrl.SetupSignalHandler()
	if err := waitForAPIServer(ctx, cfg, setupLog); err != nil {
		return err
	}
	if o.reloaderImage == "" {
		if o.reloaderImage, err = ownImage(ctx, cfg, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")); err != nil {
			return err
		}
	}
	setupLog.Info("reloader sidecar", "image", o.reloaderImage)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "memcached-operator.cache.example.com",
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.gracefulShutdownTimeout,
		Cache:                         controller.CacheOptions(splitList(o.watchNamespaces)),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	if err := (&controller.MemcachedReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("memcached-operator"),
		Defaults:                resources.Options{MemcachedImage: o.memcachedImage, ExporterImage: o.exporterImage, ReloaderImage: o.reloaderImage},
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Namespaces:              splitList(o.watchNamespaces),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the memcached controller: %w", err)
	}
	metrics.Register(buildinfo.Version(version), mgr.GetCache())

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// waitForAPIServer blocks until the apiserver answers discovery. Building
// the manager needs the API's REST mappings (its cache is filtered per
// kind), so a manager started while the control plane is down would
// otherwise exit at once, again and again: a crash loop whose growing
// back-off (up to five minutes in the kubelet) keeps the operator away long
// after the apiserver is back. test/chaos's outage scenario found it.
// Every error is waited out, refusals included: an apiserver that has just
// started answers 401 and 403 until its authenticators and RBAC caches
// have synced. Each attempt is logged with its error.
func waitForAPIServer(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	start, delay := time.Now(), apiServerRetryMin
	for attempt := 1; ; attempt++ {
		_, err := dc.ServerGroups()
		if err == nil {
			if attempt > 1 {
				log.Info("the apiserver answers", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		log.Info("waiting for the apiserver", "attempt", attempt, "waited", time.Since(start).Round(time.Second).String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for the apiserver: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, apiServerRetryMax)
	}
}

// ownImage is the image of the manager container of the operator's own pod,
// which the reloader sidecars run: reading it from the pod keeps them on
// the exact image (tag or digest) the operator was deployed with, through
// kustomize, Helm and OLM alike, without a second place to pin it. Out of a
// pod (no POD_NAME) it is empty, and Memcacheds with spec.security stall
// with a message naming --reloader-image.
func ownImage(ctx context.Context, cfg *rest.Config, namespace, name string) (string, error) {
	if name == "" || namespace == "" {
		return "", nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", err
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return "", fmt.Errorf("read the operator's own pod %s/%s for the reloader image (or set --reloader-image): %w", namespace, name, err)
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == managerContainer {
			return ctr.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container %q to take the reloader image from: set --reloader-image", namespace, name, managerContainer)
}

// managerContainer is the operator's container in its Deployment.
const managerContainer = "manager"

// The back-off between attempts to reach the apiserver at start-up.
var apiServerRetryMin, apiServerRetryMax = time.Second, 10 * time.Second

// deleteMemcacheds is the --delete-memcacheds mode (see
// controller.DeleteAllMemcacheds).
func deleteMemcacheds(o *options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}
	cfg.UserAgent = "memcached-operator/" + buildinfo.Version(version)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctrl.SetupSignalHandler(), o.deleteMemcachedsTimeout)
	defer cancel()
	return controller.DeleteAllMemcacheds(ctx, c, splitList(o.watchNamespaces), 2*time.Second, ctrl.Log.WithName("uninstall"))
}

// applyRateLimits sets the client-side limits. Without --kube-api-qps the
// client is unlimited (controller-runtime's default) and the apiserver's
// API Priority and Fairness does the throttling; with it, the burst defaults
// to twice the rate.
func applyRateLimits(cfg *rest.Config, qps float64, burst int) {
	if qps <= 0 {
		return
	}
	cfg.QPS = float32(qps)
	cfg.Burst = burst
	if burst <= 0 {
		cfg.Burst = int(2 * qps)
	}
}

// softMemoryLimit returns the Go runtime's soft memory limit for a container
// whose memory limit is memoryLimit bytes (the downward API's
// limits.memory), unless GOMEMLIMIT already sets one. A limit at the
// container's limit would leave no room for what the Go heap does not count
// (stacks, the runtime, mapped files), so the kernel would still kill the
// process; ratio leaves that room.
func softMemoryLimit(gomemlimit, memoryLimit string, ratio float64) (int64, bool) {
	if gomemlimit != "" || memoryLimit == "" || ratio <= 0 || ratio > 1 {
		return 0, false
	}
	limit, err := strconv.ParseInt(memoryLimit, 10, 64)
	if err != nil || limit <= 0 {
		return 0, false
	}
	return int64(float64(limit) * ratio), true
}

// splitList parses a comma-separated flag value, ignoring blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
