// Package helmtemplate renders the generated chart as `helm template`
// does, with Helm's own v4 SDK (the install action, client only), for the
// tests that read what Helm, Flux's helm-controller or Argo CD would apply.
package helmtemplate

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/example/memcached-operator/hack/chart"
	"github.com/example/memcached-operator/test/internal/repo"
)

// KubeVersion is the cluster version client-only renders assume: the
// control plane the tests run (Helm's SDK assumes 1.20 in test binaries,
// which the chart's kubeVersion refuses).
var KubeVersion = func() *common.KubeVersion {
	v, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		panic(err)
	}
	return v
}()

// Dir is the chart's directory in the repository.
func Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(repo.MustRoot(t), filepath.FromSlash(chart.Dir))
}

// Load loads the chart in dir.
func Load(t testing.TB, dir string) *chartv2.Chart {
	t.Helper()
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("load the chart in %s: %v", dir, err)
	}
	return c
}

// Template renders the chart as `helm template RELEASE -n NAMESPACE`
// with the values; the release holds the manifest and the hooks.
func Template(c *chartv2.Chart, release, namespace string, values map[string]any) (*releasev1.Release, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = release, namespace
	install.KubeVersion = KubeVersion
	r, err := install.Run(c, values)
	if err != nil {
		return nil, err
	}
	return r.(*releasev1.Release), nil
}
