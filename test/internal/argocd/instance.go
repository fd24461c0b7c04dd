//go:build !unit

package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Namespace is where Argo CD runs and keeps its Applications, as its
// install.yaml has it.
const Namespace = "argocd"

// FieldManager is the field manager docs/deploy/argocd.md applies
// deploy/argocd with, so that argocd-cm's health check is ours alone.
const FieldManager = "memcached-argocd"

// Instance is a running Argo CD: redis, the repo-server, the application
// controller, the ApplicationSet controller and the API server, each the
// real component (bin/argocd, picked by ARGOCD_BINARY_NAME as its image's
// entrypoint does) running as a process against the hub cluster, the way
// Argo CD's own Procfile runs it for its end-to-end tests.
type Instance struct {
	// Kubeconfig of the hub, where Applications live.
	Kubeconfig string
	// Server is the API server's address, for the CLI (plaintext).
	Server string
	// CLIConfig is the CLI's config file, logged in as admin.
	CLIConfig string

	bin, kubectl string
	components   map[string]*proc.Process
}

// Start installs Argo CD's CRDs, ConfigMaps and Secrets from its own
// install.yaml (bin/argocd-dist, copied from the pinned module by `make
// tools`) into the hub of kubeconfig, runs every component until the test
// ends, and logs the CLI in as admin. PATH gives the repo-server git,
// kustomize and helm from bin/, and the module's git-verify-wrapper.sh,
// which v3.6 runs on every manifest generation.
func Start(t testing.TB, kubeconfig string) *Instance {
	t.Helper()
	bins, err := repo.Bin("argocd", "argocd-dist", "kubectl", "kustomize", "helm")
	if err != nil {
		t.Fatal(err)
	}
	install, err := installObjects(filepath.Join(bins["argocd-dist"], "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cluster.Run(t, kubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+Namespace+"\n"), bins["kubectl"], "apply", "-f", "-")
	cluster.Run(t, kubeconfig, install, bins["kubectl"], "apply", "--server-side", "-n", Namespace, "-f", "-")
	// kubectl wait fails, rather than waits, on a CRD too new to have status.
	cluster.Eventually(t, time.Minute, "Argo CD's CRDs established", func() error {
		out, err := cluster.TryRun(kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=10s",
			"crd/applications.argoproj.io", "crd/applicationsets.argoproj.io", "crd/appprojects.argoproj.io")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})

	a := &Instance{Kubeconfig: kubeconfig, bin: bins["argocd"], kubectl: bins["kubectl"], components: map[string]*proc.Process{}}
	state := t.TempDir()
	binDir := filepath.Dir(bins["argocd"])
	common := []string{
		"KUBECONFIG=" + kubeconfig,
		"ARGOCD_FAKE_IN_CLUSTER=true",
		"ARGOCD_TLS_DATA_PATH=" + mkdir(t, state, "tls"),
		"ARGOCD_SSH_DATA_PATH=" + mkdir(t, state, "ssh"),
		"ARGOCD_GNUPGHOME=" + mkdir(t, state, "gnupg"),
		"ARGOCD_GPG_DATA_PATH=" + mkdir(t, state, "gpg"),
		"ARGOCD_GPG_ENABLED=false",
		"PATH=" + filepath.Join(bins["argocd-dist"], "path") + ":" + binDir + ":" + os.Getenv("PATH"),
	}
	redisPort := run.FreePort(t)
	a.components["redis"] = proc.Start(t, proc.Spec{
		Name: "redis", Path: "redis-server",
		Args:  []string{"--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
		Ready: dialReady("127.0.0.1:" + strconv.Itoa(redisPort)),
	})
	redis := "127.0.0.1:" + strconv.Itoa(redisPort)

	repoPort, repoMetrics := run.FreePort(t), run.FreePort(t)
	repoServer := "127.0.0.1:" + strconv.Itoa(repoPort)
	a.start(t, "argocd-repo-server", common, httpReady(repoMetrics, "/healthz"),
		"--address=127.0.0.1", "--port="+strconv.Itoa(repoPort),
		"--metrics-address=127.0.0.1", "--metrics-port="+strconv.Itoa(repoMetrics),
		"--redis="+redis)

	controllerMetrics := run.FreePort(t)
	a.start(t, "argocd-application-controller", append(common, "HOSTNAME=argocd-application-controller-0"), httpReady(controllerMetrics, "/healthz"),
		"--namespace="+Namespace, "--redis="+redis, "--repo-server="+repoServer,
		"--metrics-port="+strconv.Itoa(controllerMetrics),
		// The tests refresh Applications themselves (a webhook's job);
		// the periodic resync only adds load.
		"--app-resync=3600")

	// It registers no health checks, so its metrics say it is up.
	appsetMetrics := run.FreePort(t)
	a.start(t, "argocd-applicationset-controller", common, httpReady(appsetMetrics, "/metrics"),
		"--namespace="+Namespace, "--argocd-repo-server="+repoServer,
		"--metrics-addr=127.0.0.1:"+strconv.Itoa(appsetMetrics),
		"--probe-addr=127.0.0.1:"+strconv.Itoa(run.FreePort(t)),
		"--webhook-addr=127.0.0.1:"+strconv.Itoa(run.FreePort(t)))

	serverPort := run.FreePort(t)
	a.Server = "127.0.0.1:" + strconv.Itoa(serverPort)
	a.start(t, "argocd-server", common, httpReady(serverPort, "/healthz"),
		"--namespace="+Namespace, "--redis="+redis, "--repo-server="+repoServer,
		"--insecure", "--address=127.0.0.1", "--port="+strconv.Itoa(serverPort),
		"--metrics-address=127.0.0.1", "--metrics-port="+strconv.Itoa(run.FreePort(t)),
		"--staticassets="+mkdir(t, state, "static"))

	a.login(t, state)
	return a
}

// Apply applies a kustomization to the hub as docs/deploy/argocd.md says:
// server-side, under FieldManager, in Namespace.
func (a *Instance) Apply(t testing.TB, dir string, extraArgs ...string) {
	t.Helper()
	args := append([]string{"apply", "--server-side", "--field-manager=" + FieldManager, "-n", Namespace, "-k", dir}, extraArgs...)
	cluster.Run(t, a.Kubeconfig, nil, a.kubectl, args...)
}

// start runs one component of the multi-call binary.
func (a *Instance) start(t testing.TB, name string, env []string, ready func(context.Context) error, args ...string) {
	t.Helper()
	a.components[name] = proc.Start(t, proc.Spec{
		Name: name, Path: a.bin,
		Args:         append([]string{"--loglevel=info"}, args...),
		Env:          append(append([]string{}, env...), "ARGOCD_BINARY_NAME="+name),
		Ready:        ready,
		ReadyTimeout: 2 * time.Minute,
	})
}

// Output is what a component (argocd-application-controller, ...) logged.
func (a *Instance) Output(component string) string {
	if p := a.components[component]; p != nil {
		return p.Output()
	}
	return ""
}

// login logs the CLI in as admin with the password argocd-server wrote to
// argocd-initial-admin-secret, as `argocd login` after an install.
func (a *Instance) login(t testing.TB, state string) {
	t.Helper()
	a.CLIConfig = filepath.Join(state, "cli-config")
	var password string
	cluster.Eventually(t, time.Minute, "argocd-initial-admin-secret", func() error {
		out, err := cluster.TryRun(a.Kubeconfig, nil, a.kubectl, "get", "secret", "-n", Namespace, "argocd-initial-admin-secret", "-o", "go-template={{.data.password | base64decode}}")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		password = out
		return nil
	})
	a.CLI(t, "login", a.Server, "--plaintext", "--username=admin", "--password="+password)
}

// CLI runs the argocd CLI against the API server and returns its output; a
// failure fails the test.
func (a *Instance) CLI(t testing.TB, args ...string) string {
	t.Helper()
	out, err := a.TryCLI(args...)
	if err != nil {
		t.Fatalf("argocd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TryCLI is CLI that returns the error (the CLI's exit status) instead.
func (a *Instance) TryCLI(args ...string) (string, error) {
	args = append(args, "--config="+a.CLIConfig)
	if args[0] != "login" {
		args = append(args, "--server="+a.Server, "--plaintext")
	}
	return cluster.TryRun(a.Kubeconfig, nil, a.bin, args...)
}

// RegisterCluster adds the cluster of kubeconfig to Argo CD under name, as
// `argocd cluster add CONTEXT --name NAME` does: a Secret labelled
// argocd.argoproj.io/secret-type=cluster with the server and credentials.
// It returns the cluster's server URL.
func (a *Instance) RegisterCluster(t testing.TB, name, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(map[string]any{
		"bearerToken": cfg.BearerToken,
		"tlsClientConfig": map[string]any{
			"caData":   cfg.CAData,
			"certData": cfg.CertData,
			"keyData":  cfg.KeyData,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": "cluster-" + name, "namespace": Namespace,
			"labels": map[string]string{"argocd.argoproj.io/secret-type": "cluster"},
		},
		"stringData": map[string]string{"name": name, "server": cfg.Host, "config": string(config)},
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster.Run(t, a.Kubeconfig, secret, a.kubectl, "apply", "-f", "-")
	return cfg.Host
}

// installObjects is what of install.yaml the processes need in the
// cluster: the CRDs, and the ConfigMaps and Secrets they read their
// settings from. The Deployments, Services and RBAC are what the processes
// replace.
func installObjects(path string) ([]byte, error) {
	return readInstall(path, func(n *yaml.RNode) bool {
		switch n.GetKind() {
		case "CustomResourceDefinition", "ConfigMap", "Secret":
			return true
		}
		return false
	})
}

// InstallManifest is one object of Argo CD's install.yaml, as a user
// reinstalling Argo CD applies it.
func InstallManifest(t testing.TB, kind, name string) []byte {
	t.Helper()
	bins, err := repo.Bin("argocd-dist")
	if err != nil {
		t.Fatal(err)
	}
	b, err := readInstall(filepath.Join(bins["argocd-dist"], "install.yaml"), func(n *yaml.RNode) bool {
		return n.GetKind() == kind && n.GetName() == name
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readInstall returns the objects of install.yaml that keep selects.
func readInstall(path string, keep func(*yaml.RNode) bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	nodes, err := (&kio.ByteReader{Reader: f, OmitReaderAnnotations: true}).Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var kept []*yaml.RNode
	for _, n := range nodes {
		if keep(n) {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s has none of the objects wanted", path)
	}
	var b strings.Builder
	if err := (&kio.ByteWriter{Writer: &b}).Write(kept); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func mkdir(t testing.TB, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dialReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

// httpReady is ready when GET path on the port answers 200.
func httpReady(port int, path string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := run.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		return err
	}
}
