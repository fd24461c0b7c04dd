package chaos

import (
	"strings"
	"testing"
)

// Every scenario at Small scale: what the operator loses or gets wrong
// fails the test; figures are logged, never asserted (`make chaos` reports
// them at full scale in docs/reliability.md). The scenarios run side by
// side, each on its own cluster: most of their time is waiting (for a
// Lease to expire, an outage to end, a back-off window to pass).

func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	r, err := Failover(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
	if r.CreatedEvents == 0 {
		t.Error("no Created events recorded")
	}
}

func TestControlPlaneOutage(t *testing.T) {
	t.Parallel()
	for _, target := range OutageTargets {
		t.Run(strings.Join(target, "+"), func(t *testing.T) {
			t.Parallel()
			r, err := Outage(Small, target, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", r)
			reportProblems(t, r.Problems)
		})
	}
}

func reportProblems(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func TestChaosDrift(t *testing.T) {
	t.Parallel()
	r, err := Drift(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
	if len(r.ByKind) != len(driftKinds) {
		t.Errorf("%d kinds of drift healed, want all %d", len(r.ByKind), len(driftKinds))
	}
}

func TestLostPermission(t *testing.T) {
	t.Parallel()
	r, err := LostPermission(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
}

func TestAdmissionRejection(t *testing.T) {
	t.Parallel()
	r, err := AdmissionRejection(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
}

func TestOperatorUpgrade(t *testing.T) {
	t.Parallel()
	r, err := Upgrade(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
}

func TestOverload(t *testing.T) {
	t.Parallel()
	r, err := Overload(Small, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	reportProblems(t, r.Problems)
}
