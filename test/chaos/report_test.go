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
