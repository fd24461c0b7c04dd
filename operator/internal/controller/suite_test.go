//go:build !unit

package controller

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// One control plane (kube-apiserver + etcd from bin/) and one manager serve
// every test of the package; each test works in its own namespace.
//
// The files that need it carry the build constraint !unit: make test-unit
// builds with -tags unit, which leaves envtest out of the test binary, so
// the pure tests (builders, status, pod trouble, the write tracker) compile
// and run without bin/. make test runs both ways, so a pure test that
// reaches for the control plane fails to compile there.
var (
	testScheme = runtime.NewScheme()
	// k8sClient reads and writes directly, uncached, as a user would.
	k8sClient client.Client
	// reconciler is the instance the manager runs, for direct calls.
	reconciler *MemcachedReconciler
	// managerRequests counts the manager's requests to the apiserver.
	managerRequests = &requestCounter{}
	testCtx         context.Context
)

// unmanagedNamespace is outside the manager's cache: tests that call a
// reconciler of their own work there.
const unmanagedNamespace = "unmanaged"

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel()), zap.StacktraceLevel(zapcore.PanicLevel)))
	if err := clientgoscheme.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(testScheme); err != nil {
		panic(err)
	}

	assets, err := envtestAssets()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "deploy", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest from %s: %v\n", assets, err)
		_ = env.Stop() // a CRD that fails to install leaves the control plane running
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()

	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		panic(err)
	}

	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.Wrap(managerRequests.wrap)
	mgrCfg.QPS, mgrCfg.Burst = 200, 400
	cacheOpts := CacheOptions(nil)
	// The manager leaves one namespace alone, so a test can drive a
	// reconciler of its own there without the manager racing it.
	cacheOpts.DefaultNamespaces = map[string]cache.Config{
		cache.AllNamespaces: {FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", unmanagedNamespace)},
	}
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
	})
	if err != nil {
		panic(err)
	}
	reconciler = &MemcachedReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("memcached-operator"),
		Defaults:                testDefaults,
		MaxConcurrentReconciles: 4,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		panic(err)
	}

	var cancel context.CancelFunc
	testCtx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(testCtx) }()
	if !mgr.GetCache().WaitForCacheSync(testCtx) {
		fmt.Fprintln(os.Stderr, "manager cache did not sync")
		cancel()
		return 1
	}

	if err := k8sClient.Create(testCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unmanagedNamespace}}); err != nil {
		fmt.Fprintf(os.Stderr, "create namespace %s: %v\n", unmanagedNamespace, err)
		cancel()
		return 1
	}

	code := m.Run()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "manager did not stop within 30s")
	}
	return code
}

// envtestAssets finds kube-apiserver and etcd: $KUBEBUILDER_ASSETS (the
// Makefile exports bin/), else the repository's bin/. Missing binaries fail
// the suite with the fix; they never skip it.
func envtestAssets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(abs, b)); err != nil {
			return "", fmt.Errorf("envtest needs %s in %s: run `make tools` first (it builds the control plane from the Go module proxy)", b, abs)
		}
	}
	return abs, nil
}

// zapLevel keeps test output to errors (the tests assert on objects, not on
// logs); TEST_VERBOSE=1 shows the reconciler's whole story.
func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// requestCounter records every request the manager sends, but watches.
type requestCounter struct {
	mu       sync.Mutex
	requests []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			c.requests = append(c.requests, req.Method+" "+req.URL.Path)
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// writesSince returns the mutating requests recorded after mark whose path
// contains every filter string.
func (c *requestCounter) writesSince(mark int, filters ...string) []string {
	return c.since(mark, false, filters)
}

// readsSince returns the GET requests recorded after mark whose path
// contains every filter string.
func (c *requestCounter) readsSince(mark int, filters ...string) []string {
	return c.since(mark, true, filters)
}

func (c *requestCounter) since(mark int, reads bool, filters []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
next:
	for _, r := range c.requests[mark:] {
		if strings.HasPrefix(r, http.MethodGet+" ") != reads {
			continue
		}
		for _, f := range filters {
			if !strings.Contains(r, f) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

func (c *requestCounter) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
