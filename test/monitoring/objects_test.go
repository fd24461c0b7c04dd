package monitoring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/helmtemplate"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The ServiceMonitor, PodMonitor, PrometheusRule and dashboard ConfigMap
// are accepted by a real apiserver with the monitoring.coreos.com CRDs
// generated from prometheus-operator's Go API (server-side dry run): as
// deploy/prometheus ships them, in the prod overlay that opts into the
// alerts component, and from the chart with every monitoring knob on. A
// rule the CRD forbids is refused.
func TestMonitoringObjectsAreValid(t *testing.T) {
	bins, err := repo.Bin("kubectl", "monitoring-crds")
	if err != nil {
		t.Fatal(err)
	}
	env := cluster.StartEnvtest(t)
	kubectl := func(stdin []byte, args ...string) (string, error) {
		return cluster.TryRun(env.Kubeconfig, stdin, bins["kubectl"], args...)
	}
	for _, crd := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", filepath.Join(bins["monitoring-crds"], "monitoring.coreos.com_"+crd+".yaml"))
	}
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--all", "crd", "--timeout=60s")
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "create", "namespace", names.OperatorNamespace)

	apply := func(what string, manifests []byte) {
		t.Helper()
		if out, err := kubectl(manifests, "apply", "--server-side", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("%s: %v\n%s", what, err, out)
		}
	}
	apply("deploy/prometheus", build(t, filepath.Join(repo.MustRoot(t), "deploy", "prometheus")))

	// An overlay opting into the alerts component.
	overlay := t.TempDir()
	root := repo.MustRoot(t)
	rel := func(elem ...string) string {
		p, err := filepath.Rel(overlay, filepath.Join(append([]string{root}, elem...)...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(
		"resources:\n- "+rel("overlays", "prod", "operator")+"\ncomponents:\n- "+rel("deploy", "prometheus", "alerts")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withAlerts := build(t, overlay)
	for _, kind := range []string{"kind: PrometheusRule", "kind: ConfigMap", "kind: Deployment"} {
		if !strings.Contains(string(withAlerts), kind) {
			t.Errorf("prod with the alerts component renders no %s", kind)
		}
	}
	var monitoring []string
	for _, doc := range strings.Split(string(withAlerts), "\n---\n") {
		if strings.Contains(doc, "kind: PrometheusRule") || strings.Contains(doc, "grafana_dashboard") {
			monitoring = append(monitoring, doc)
		}
	}
	apply("prod with the alerts component", []byte(strings.Join(monitoring, "\n---\n")))

	c := helmtemplate.Load(t, helmtemplate.Dir(t))
	r, err := helmtemplate.Template(c, "memcached-operator", names.OperatorNamespace, map[string]any{
		"metrics":    map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
		"monitoring": map[string]any{"podMonitor": map[string]any{"enabled": true}, "alerts": map[string]any{"enabled": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var fromChart []string
	for _, doc := range strings.Split(r.Manifest, "\n---\n") {
		if strings.Contains(doc, "apiVersion: monitoring.coreos.com/v1") {
			fromChart = append(fromChart, doc)
		}
	}
	if len(fromChart) != 3 {
		t.Errorf("the chart with every monitoring knob on renders %d monitoring.coreos.com objects, want 3", len(fromChart))
	}
	if !strings.Contains(r.Manifest, "{{ $labels.namespace }}") {
		t.Error("the chart's PrometheusRule lost its Prometheus templates")
	}
	apply("the chart", []byte(strings.Join(fromChart, "\n---\n")))

	t.Run("an invalid rule is refused", func(t *testing.T) {
		rule := "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: bad, namespace: memcached-operator-system}\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: X\n      expr: up == 0\n      for: ten minutes\n"
		if out, err := kubectl([]byte(rule), "apply", "--server-side", "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(out, "spec.groups[0].rules[0].for") {
			t.Errorf("a rule with for: ten minutes was accepted (%v):\n%s", err, out)
		}
	})
}

// build is `kustomize build dir`, files outside dir allowed.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
