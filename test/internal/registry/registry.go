// Package registry runs the CNCF distribution registry from bin/ (make
// tools builds it from the Go module proxy) on a free loopback port or a
// test cluster's own address, with
// the repository's own configuration (scripts/registry.yml), for tests
// that push and pull images and charts.
package registry

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:PORT, the registry part of image references.
	Host string
}

// Start runs a registry with empty storage on a free loopback port until
// the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	return StartAt(t, fmt.Sprintf("127.0.0.1:%d", run.FreePort(t)))
}

// StartAt is Start on the given address (host:port): a cluster's own
// private address, for nodes to pull from (cluster.StartRealPulling).
func StartAt(t testing.TB, host string) *Registry {
	t.Helper()
	bins, err := repo.Bin("registry")
	if err != nil {
		t.Fatal(err)
	}
	config, err := repo.Path("scripts", "registry.yml")
	if err != nil {
		t.Fatal(err)
	}
	proc.Start(t, proc.Spec{
		Name: "registry", Path: bins["registry"], Args: []string{"serve", config},
		Env: []string{"OTEL_TRACES_EXPORTER=none", "REGISTRY_HTTP_ADDR=" + host, "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=" + t.TempDir()},
		Ready: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/v2/: %s", resp.Status)
			}
			return nil
		},
	})
	return &Registry{Host: host}
}

// SigningKey makes a key pair with no password in a temporary directory,
// as make keygen does (bin/image keygen, with bin/cosign), and returns the
// private and the public key's paths: for COSIGN_KEY and
// COSIGN_PUBLIC_KEY.
func SigningKey(t testing.TB) (private, public string) {
	t.Helper()
	bins, err := repo.Bin("image", "cosign")
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "cosign")
	if _, stderr, code := run.Command(t, nil, bins["image"], "keygen", "--prefix", prefix); code != 0 {
		t.Fatalf("image keygen: exit %d: %s", code, stderr)
	}
	return prefix + ".key", prefix + ".pub"
}
