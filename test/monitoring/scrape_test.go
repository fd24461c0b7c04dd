package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

const (
	managerJob  = "memcached-operator-controller-manager-metrics-service"
	exporterJob = "memcached-exporters"
)

// The real Prometheus server (bin/prometheus) scrapes the manager as the
// shipped ServiceMonitor says (HTTPS, the bearer token of a ServiceAccount
// bound to the metrics-reader ClusterRole, honorLabels) and a real
// memcached_exporter in front of a real memcached, both run with the
// arguments of the pod template the operator wrote, labelled as the
// PodMonitor's relabelling labels them. Both targets are up, the
// operator's series exist, MemcachedDegraded fires when a Memcached is made
// Degraded (the rules loaded with `for: 0s`, the only change: promtool's
// tests cover the durations), and every query of the dashboard returns
// series.
func TestPrometheusScrapesTheOperatorAndTheCaches(t *testing.T) {
	bins, err := repo.Bin("kubectl", "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	env := cluster.StartEnvtest(t)
	c := env.Client
	ctx := context.Background()
	kubectl := func(args ...string) string {
		t.Helper()
		return cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], args...)
	}
	kubectl("apply", "--server-side", "-k", "deploy/install")
	metricsPort := run.FreePort(t)
	cluster.StartManager(t, cluster.ImpersonatingKubeconfig(t, env.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort))

	// Prometheus' identity: a ServiceAccount bound to metrics-reader.
	kubectl("create", "namespace", "monitoring")
	kubectl("create", "serviceaccount", "prometheus", "-n", "monitoring")
	kubectl("create", "clusterrolebinding", "prometheus-metrics", "--clusterrole=memcached-operator-metrics-reader", "--serviceaccount=monitoring:prometheus")
	dir := t.TempDir()
	token := strings.TrimSpace(kubectl("create", "token", "prometheus", "-n", "monitoring", "--duration=1h"))
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	// A cache with the exporter, as the operator configures it, run for real.
	kubectl("create", "namespace", "cache")
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "app-cache", "namespace": "cache"},
		"spec":     map[string]any{"size": int64(1), "monitoring": map[string]any{"exporter": map[string]any{"enabled": true}}},
	}}
	if err := c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	cluster.Eventually(t, 60*time.Second, "the app-cache Deployment", func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: "cache", Name: "app-cache"}, dep)
	})
	var memcachedArgs, exporterArgs []string
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		switch ctr.Name {
		case "memcached":
			memcachedArgs = slices.Concat(ctr.Command, ctr.Args)
		case "exporter":
			exporterArgs = slices.Concat(ctr.Command, ctr.Args)
		}
	}
	if memcachedArgs == nil || exporterArgs == nil {
		t.Fatalf("the pod template lacks memcached or the exporter: %+v", dep.Spec.Template.Spec.Containers)
	}
	sc := dep.Spec.Template.Spec.SecurityContext
	server := memcached.Start(t, memcachedArgs, memcached.UnprivilegedIdentity(sc.RunAsUser, sc.RunAsGroup))
	exporter, err := memcached.TryStartExporter(exporterArgs, server.Addr, run.FreePort(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exporter.Stop() })
	exporterURL, _ := url.Parse(exporter.URL)

	// Prometheus, configured from the shipped ServiceMonitor and PodMonitor.
	sm := readMonitor(t, "ServiceMonitor")
	endpoint := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	insecure, _ := endpoint["tlsConfig"].(map[string]any)["insecureSkipVerify"].(bool)
	config := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{"rules.yaml"},
		"scrape_configs": []any{
			map[string]any{
				"job_name": managerJob, "scheme": endpoint["scheme"], "metrics_path": endpoint["path"],
				"honor_labels":  endpoint["honorLabels"],
				"authorization": map[string]any{"credentials_file": "token"},
				"tls_config":    map[string]any{"insecure_skip_verify": insecure},
				"static_configs": []any{map[string]any{"targets": []string{fmt.Sprintf("127.0.0.1:%d", metricsPort)},
					"labels": map[string]string{"namespace": names.OperatorNamespace}}},
			},
			map[string]any{
				"job_name": exporterJob, "metrics_path": podMonitorPath(t),
				"static_configs": []any{map[string]any{"targets": []string{exporterURL.Host},
					"labels": map[string]string{"namespace": "cache", "pod": "app-cache-0", "memcached": "app-cache"}}},
			},
		},
	}
	writeYAML(t, filepath.Join(dir, "prometheus.yml"), config)
	promRules(t, dir, true, func(g *ruleGroups) {
		for _, grp := range g.Groups {
			for _, r := range grp.Rules {
				r["for"] = "0s"
			}
		}
	})
	port := run.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	proc.Start(t, proc.Spec{
		Name: "prometheus", Path: bins["prometheus"], Dir: dir,
		Args: []string{"--config.file=prometheus.yml", "--storage.tsdb.path=data", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)},
		Ready: func(ctx context.Context) error {
			_, err := httpGet(ctx, api+"/-/ready")
			return err
		},
	})

	for _, q := range []string{
		`up{job="` + managerJob + `"} == 1`,
		`up{job="` + exporterJob + `",memcached="app-cache"} == 1`,
		`memcached_up{memcached="app-cache"} == 1`,
		`memcached_operator_info`,
		`memcached_operator_instance_desired_replicas{namespace="cache",name="app-cache"} == 1`,
		`memcached_operator_instance_condition{namespace="cache",name="app-cache",condition="Ready"}`,
		`memcached_operator_instances{namespace="cache",condition="Ready"}`,
		`memcached_operator_owned_writes_total{kind="Deployment",reason="created"} >= 1`,
		`controller_runtime_reconcile_total{controller="memcached"}`,
	} {
		cluster.Eventually(t, 60*time.Second, "Prometheus to return "+q, func() error { return nonEmpty(ctx, api, q) })
	}

	// Degraded: a Service of the Memcached's name that the operator does
	// not own.
	if err := c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cache", Name: "legacy"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 11211, TargetPort: intstr.FromInt32(11211)}}},
	}); err != nil {
		t.Fatal(err)
	}
	legacy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "legacy", "namespace": "cache"}, "spec": map[string]any{"size": int64(1)},
	}}
	if err := c.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, 60*time.Second, "MemcachedDegraded to fire for cache/legacy", func() error {
		body, err := httpGet(ctx, api+"/api/v1/alerts")
		if err != nil {
			return err
		}
		var resp struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			return err
		}
		for _, a := range resp.Data.Alerts {
			if a.Labels["alertname"] == "MemcachedDegraded" && a.Labels["name"] == "legacy" && a.State == "firing" {
				return nil
			}
		}
		return fmt.Errorf("alerts: %+v", resp.Data.Alerts)
	})

	// Drift, so that the heal counter exists: scale the Deployment by hand.
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "scale", "deployment/app-cache", "-n", "cache", "--replicas=3")
	cluster.Eventually(t, 60*time.Second, "a drift heal to be counted", func() error {
		return nonEmpty(ctx, api, `memcached_operator_drift_heals_total{kind="Deployment"} >= 1`)
	})

	t.Run("the dashboard's queries return series", func(t *testing.T) {
		for _, q := range dashboardQueries(t) {
			cluster.Eventually(t, 30*time.Second, "Prometheus to return the dashboard's "+q, func() error { return nonEmpty(ctx, api, q) })
		}
	})
}

func readMonitor(t *testing.T, kind string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy", "prometheus", "monitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var o map[string]any
		if err := sigsyaml.Unmarshal([]byte(doc), &o); err == nil && o["kind"] == kind {
			return o
		}
	}
	t.Fatalf("no %s in deploy/prometheus/monitor.yaml", kind)
	return nil
}

func podMonitorPath(t *testing.T) string {
	t.Helper()
	pm := readMonitor(t, "PodMonitor")
	ep := pm["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)
	return ep["path"].(string)
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := sigsyaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nonEmpty runs an instant query and fails unless it returns a series.
func nonEmpty(ctx context.Context, api, query string) error {
	body, err := httpGet(ctx, api+"/api/v1/query?query="+url.QueryEscape(query))
	if err != nil {
		return err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return err
	}
	if resp.Status != "success" {
		return fmt.Errorf("query %s: %s", query, resp.Error)
	}
	if len(resp.Data.Result) == 0 {
		return fmt.Errorf("no series for %s", query)
	}
	return nil
}

func httpGet(ctx context.Context, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return run.HTTPGet(ctx, u)
}

// dashboardQueries are the PromQL queries of every panel of the shipped
// dashboard (deploy/prometheus/alerts/dashboard.yaml).
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy", "prometheus", "alerts", "dashboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := sigsyaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["memcached-operator.json"]), &dash); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			out = append(out, target.Expr)
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard has only %d queries", len(out))
	}
	return out
}
