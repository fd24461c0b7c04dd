// Command manager runs the Memcached operator: the Memcached controller,
// a metrics endpoint served over HTTPS behind Kubernetes authentication and
// authorization, health probes, and optional leader election.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/controller"
	"github.com/example/memcached-operator/operator/internal/resources"
)

// Default images. The memcached tag is pinned (never "latest") so that an
// operator release decides which memcached runs; Memcacheds that set
// spec.image are not affected.
const (
	defaultMemcachedImage = "memcached:1.6.39-alpine"
	defaultExporterImage  = "quay.io/prometheus/memcached-exporter:v0.15.0"
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
	kubeAPIQPS              float64
	kubeAPIBurst            int
	showVersion             bool
	zap                     zap.Options
}

func main() {
	opts := parseFlags(flag.CommandLine, os.Args[1:])
	if opts.showVersion {
		fmt.Println(buildVersion())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))
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
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 0,
		"Client-side limit of requests per second to the apiserver. 0 keeps controller-runtime's default: no client-side limit, leaving throttling to the apiserver's API Priority and Fairness, which protects it from every client at once.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0, "Client-side burst of requests to the apiserver, with a positive --kube-api-qps.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	o.zap = zap.Options{Development: false}
	o.zap.BindFlags(fs)
	// Parse errors exit 2 with usage, as the flag package does by default.
	_ = fs.Parse(args)
	return o
}

func run(o *options) error {
	setupLog := ctrl.Log.WithName("setup")
	setupLog.Info("starting memcached-operator", "version", buildVersion(),
		"memcachedImage", o.memcachedImage, "exporterImage", o.exporterImage,
		"watchNamespaces", o.watchNamespaces, "maxConcurrentReconciles", o.maxConcurrentReconciles)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}
	if o.kubeAPIQPS != 0 {
		cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	}
	cfg.UserAgent = "memcached-operator/" + buildVersion()

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
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "memcached-operator.cache.example.com",
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controller.CacheOptions(splitList(o.watchNamespaces)),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	if err := (&controller.MemcachedReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("memcached-operator"),
		Defaults:                resources.Options{MemcachedImage: o.memcachedImage, ExporterImage: o.exporterImage},
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the memcached controller: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
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

// buildVersion is the -X main.version value, else the module version Go
// recorded (set by `go install ...@vX`), else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
