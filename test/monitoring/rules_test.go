// Package monitoring proves the observability the repository ships: the
// alerts with Prometheus' own promtool (check and unit tests of every
// alert, firing and not firing), the prometheus-operator objects against
// CRDs generated from prometheus-operator's Go API, and, with the real
// Prometheus server, a scrape of the manager and of a real
// memcached_exporter in front of a real memcached.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/repo"
)

type ruleGroups struct {
	Groups []struct {
		Name  string           `json:"name"`
		Rules []map[string]any `json:"rules"`
	} `json:"groups"`
}

// promRules writes the PrometheusRule's groups as a Prometheus rules file,
// as prometheus-operator hands them to Prometheus; withAnnotations false
// drops the annotations (promtool's unit tests compare them verbatim).
func promRules(t *testing.T, dir string, withAnnotations bool, edit func(*ruleGroups)) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy", "prometheus", "alerts", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string     `json:"kind"`
		Spec ruleGroups `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(raw, &rule); err != nil || rule.Kind != "PrometheusRule" {
		t.Fatalf("deploy/prometheus/alerts/rules.yaml holds no PrometheusRule (%v)", err)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if !withAnnotations {
				delete(r, "annotations")
			}
		}
	}
	if edit != nil {
		edit(&rule.Spec)
	}
	out, err := sigsyaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	bins, err := repo.Bin("promtool")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins["promtool"], args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The rules pass `promtool check rules` (PromQL, durations, annotation
// templates) and `promtool test rules`; every alert has a test in which it
// fires and one in which it does not; and a changed threshold fails them.
func TestAlerts(t *testing.T) {
	dir := t.TempDir()
	promRules(t, dir, true, nil)
	if out, err := promtool(t, dir, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	unit := t.TempDir()
	if err := os.WriteFile(filepath.Join(unit, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	rules := promRules(t, unit, false, nil)
	if out, err := promtool(t, unit, "test", "rules", "alerts_test.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// Coverage: each alert of the rules fires in some test and stays
	// silent in another.
	var cases struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := sigsyaml.Unmarshal(tests, &cases); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range cases.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				silent[a.AlertName] = true
			}
		}
	}
	raw, _ := os.ReadFile(rules)
	var groups ruleGroups
	if err := sigsyaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			alerts = append(alerts, name)
			if !fires[name] || !silent[name] {
				t.Errorf("alert %s: a test where it fires = %v, one where it does not = %v; want both", name, fires[name], silent[name])
			}
		}
	}
	if len(alerts) < 9 {
		t.Errorf("only %d alerts: %v", len(alerts), alerts)
	}

	t.Run("a changed threshold fails the unit tests", func(t *testing.T) {
		promRules(t, unit, false, func(g *ruleGroups) {
			for _, grp := range g.Groups {
				for _, r := range grp.Rules {
					if r["alert"] == "MemcachedConnectionsNearLimit" {
						r["expr"] = strings.Replace(r["expr"].(string), "0.9", "0.95", 1)
					}
				}
			}
		})
		out, err := promtool(t, unit, "test", "rules", "alerts_test.yaml")
		if err == nil || !strings.Contains(out, "MemcachedConnectionsNearLimit") {
			t.Fatalf("promtool passed a rule whose threshold changed:\n%s", out)
		}
	})
	if !slices.Contains(alerts, "MemcachedDegraded") {
		t.Error("no MemcachedDegraded alert")
	}
}

// Every alert has a runbook section in docs/runbooks.md, where its
// runbook_url points.
func TestRunbooks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	dir := t.TempDir()
	rulesRaw, _ := os.ReadFile(promRules(t, dir, true, nil))
	var groups ruleGroups
	if err := sigsyaml.Unmarshal(rulesRaw, &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			if !strings.Contains(doc, "\n## "+name+"\n") {
				t.Errorf("docs/runbooks.md has no section \"## %s\"", name)
			}
			annotations, _ := r["annotations"].(map[string]any)
			if url, _ := annotations["runbook_url"].(string); !strings.HasSuffix(url, "docs/runbooks.md#"+strings.ToLower(name)) {
				t.Errorf("%s: runbook_url %q", name, url)
			}
		}
	}
}
