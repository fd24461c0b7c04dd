// Package flux runs Flux itself against a test cluster: the CRDs and
// source-controller and kustomize-controller from bin/ (make tools builds
// them from the Go module proxy), as processes on loopback, the way they run
// in flux-system, only outside the cluster.
package flux

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Controllers are running source- and kustomize-controller.
type Controllers struct {
	Source, Kustomize *proc.Process
}

// Start installs Flux's CRDs and namespace into the cluster of kubeconfig
// and runs both controllers until the test ends.
func Start(t testing.TB, kubeconfig string) *Controllers {
	t.Helper()
	bins, err := repo.Bin("kubectl", "source-controller", "kustomize-controller", "flux-crds")
	if err != nil {
		t.Fatal(err)
	}
	cluster.Run(t, kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", bins["flux-crds"])
	cluster.Run(t, kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=60s",
		"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io")
	cluster.Run(t, kubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n"), bins["kubectl"], "apply", "-f", "-")

	env := []string{"KUBECONFIG=" + kubeconfig, "RUNTIME_NAMESPACE=flux-system"}
	storage := run.FreePort(t)
	c := &Controllers{}
	c.Source = proc.Start(t, controller(t, "source-controller", bins["source-controller"], env,
		"--storage-path="+t.TempDir(),
		"--storage-addr=127.0.0.1:"+strconv.Itoa(storage),
		"--storage-adv-addr=127.0.0.1:"+strconv.Itoa(storage)))
	c.Kustomize = proc.Start(t, controller(t, "kustomize-controller", bins["kustomize-controller"], env,
		"--no-remote-bases=true", "--requeue-dependency=2s"))
	return c
}

// controller is the spec of a Flux controller on free loopback ports,
// ready when its health endpoint says so.
func controller(t testing.TB, name, path string, env []string, args ...string) proc.Spec {
	health := run.FreePort(t)
	return proc.Spec{
		Name: name, Path: path, Env: env,
		Args: append([]string{
			"--enable-leader-election=false",
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(run.FreePort(t)),
			"--health-addr=127.0.0.1:" + strconv.Itoa(health),
			"--log-level=info",
		}, args...),
		Ready: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("readyz: %s", resp.Status)
			}
			return nil
		},
		ReadyTimeout: 60 * time.Second,
	}
}
