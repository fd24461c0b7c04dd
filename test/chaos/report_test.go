package chaos

import (
	"strings"
	"testing"
	"time"
)

// The report renders every section from a full set of results, and lists
// what was lost.
func TestReportRenders(t *testing.T) {
	r := &Report{
		Runs:     1,
		Failover: []FailoverResult{{Initial: 2, KillToLease: 16 * time.Second}},
		Outages:  [][]OutageResult{{{Target: "etcd", CRs: 4, Outage: time.Second, ManagerExits: []string{"exit status 1"}}}},
		Drift:    DriftResult{Events: 2, ByKind: []DriftKindStats{{Kind: "delete Service", Events: 2}}, Unhealed: []string{"event 1"}, Problems: []string{"event 1"}},
		Fuzz:     FuzzResult{Target: "FuzzBuilders", Execs: 10},
	}
	md := r.Markdown("2026-12-03")
	for _, want := range []string{"## Summary", "## 1. Leader failover", "## 2. Control-plane outage", "## 3. Chaos drift",
		"## 4. Lost permissions", "## 5. Admission rejections", "## 6. Operator upgrade", "## 7. Overload", "## 8. Fuzzing",
		"chaos drift: event 1", "| delete Service | 2 |", "16.0 s"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// kwokctl v0.8.0 only handles several --extra-args for its first component.
func TestKwokExtraArgs(t *testing.T) {
	got, err := kwokExtraArgs(defaultComponentArgs, map[string][]string{"kube-controller-manager": {"leader-elect=false"}, "kube-scheduler": {"leader-elect=false"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "--extra-args=kube-controller-manager=kube-api-qps=500 --extra-args=kube-controller-manager=leader-elect=false --extra-args=kube-scheduler=leader-elect=false"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if _, err := kwokExtraArgs(map[string][]string{"a": {"x=1", "y=2"}, "b": {"x=1", "y=2"}}); err == nil {
		t.Error("two components with several flags each: want an error")
	}
}
