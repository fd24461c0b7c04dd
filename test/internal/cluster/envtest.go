// Package cluster gives repository tests a real control plane and the tools
// to drive it the way users do: an envtest kube-apiserver + etcd from bin/,
// a kubeconfig file for bin/kubectl and bin/manager, impersonation of a
// ServiceAccount, and the manager binary as a process.
package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
)

// QuietClientLogs drops controller-runtime's client logs: the tests'
// own assertions tell the story. It is not done at init, so that a process
// started from a test binary (the benchmark's seed manager) can still set
// its own logger.
func QuietClientLogs() {
	quietOnce.Do(func() { ctrllog.SetLogger(logr.Discard()) })
}

var quietOnce sync.Once

// Envtest is a running kube-apiserver and etcd with an admin kubeconfig.
type Envtest struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string // file path, admin (system:masters)
	env        *envtest.Environment
}

// Scheme knows the built-in kinds; tests use unstructured for the rest.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// StartEnvtest starts a control plane from bin/ and stops it when the test
// ends. Missing binaries fail the test with the command that builds them.
func StartEnvtest(t testing.TB) *Envtest {
	t.Helper()
	QuietClientLogs()
	if _, err := repo.Bin("kube-apiserver", "etcd"); err != nil {
		t.Fatal(err)
	}
	dir, err := repo.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed start can leave etcd or the apiserver running
		t.Fatalf("start envtest from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop envtest: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Envtest{Config: cfg, Client: c, Kubeconfig: path, env: env}
}

// ImpersonatingKubeconfig writes a copy of kubeconfig whose user acts as
// the given ServiceAccount (the `as:` field kubectl and client-go honour),
// so a process started with it has exactly that account's RBAC.
func ImpersonatingKubeconfig(t testing.TB, kubeconfig, namespace, serviceAccount string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig-"+serviceAccount)
	if err := WriteImpersonatingKubeconfig(kubeconfig, path, namespace, serviceAccount); err != nil {
		t.Fatal(err)
	}
	return path
}

// WriteImpersonatingKubeconfig is ImpersonatingKubeconfig for callers
// without a test: it writes the copy to path.
func WriteImpersonatingKubeconfig(kubeconfig, path, namespace, serviceAccount string) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount)
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// Run runs a command with KUBECONFIG set and returns its combined output;
// a non-zero exit fails the test with that output.
func Run(t testing.TB, kubeconfig string, stdin []byte, name string, args ...string) string {
	t.Helper()
	out, err := TryRun(kubeconfig, stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

// TryRun is Run that returns the error instead of failing.
func TryRun(kubeconfig string, stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if root, err := repo.Root(); err == nil {
		cmd.Dir = root
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Manager is bin/manager running as a process.
type Manager struct {
	*proc.Process
}

// StartManager runs bin/manager with the kubeconfig and extra flags until
// the test ends. Its log is kept for assertions and printed on failure.
func StartManager(t testing.TB, kubeconfig string, args ...string) *Manager {
	t.Helper()
	return startManager(t, kubeconfig, nil, args...)
}

// StartManagerAsPod runs bin/manager as the manager container of a pod
// (kwok's, whose containers do not run): POD_NAME and POD_NAMESPACE are
// set as the Deployment's downward API sets them, so the manager takes the
// reloader sidecar's image from that pod, as it does in a cluster.
func StartManagerAsPod(t testing.TB, kubeconfig string, pod types.NamespacedName, args ...string) *Manager {
	t.Helper()
	return startManager(t, kubeconfig, []string{"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace}, args...)
}

// ManagerPod returns a Running pod of the operator's Deployment, or an
// error while there is none.
func ManagerPod(ctx context.Context, c client.Client) (types.NamespacedName, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(names.OperatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return types.NamespacedName{}, err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, nil
		}
	}
	return types.NamespacedName{}, fmt.Errorf("no Running manager pod in %s among %d", names.OperatorNamespace, len(pods.Items))
}

func startManager(t testing.TB, kubeconfig string, env []string, args ...string) *Manager {
	t.Helper()
	bins, err := repo.Bin("manager")
	if err != nil {
		t.Fatal(err)
	}
	return &Manager{proc.Start(t, proc.Spec{
		Name: "manager",
		Path: bins["manager"],
		Args: append([]string{"--kubeconfig=" + kubeconfig, "--health-probe-bind-address=0", "--zap-devel=false"}, args...),
		Env:  append([]string{"KUBECONFIG=" + kubeconfig}, env...),
		// It drains in-flight reconciles for up to --graceful-shutdown-timeout.
		StopTimeout: 30 * time.Second,
	})}
}

// Log returns everything the manager printed so far.
func (m *Manager) Log() string { return m.Output() }
