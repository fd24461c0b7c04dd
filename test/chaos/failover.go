package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/names"
)

// FailoverResult is scenario 1: two managers with leader election, the
// leader killed with SIGKILL while Memcacheds are being created, then a
// graceful SIGTERM handover.
type FailoverResult struct {
	Initial, DuringKill, DuringTerm int
	// From the kill: until the standby holds the Lease, until every CR
	// has converged.
	KillToLease, KillToConverged time.Duration
	// From SIGTERM to the leader: the same two.
	TermToLease, TermToConverged time.Duration
	// AuditedWrites are the managers' writes the apiserver's audit log
	// holds; NonLeaderWrites those made by a manager that was not the last
	// to write the Lease (two leaders at once).
	AuditedWrites, NonLeaderWrites int
	// CreatedEvents are the "Created" events; DuplicateCreated name a kind
	// already named by an earlier one for the same Memcached, and
	// MissingCreated the Memcacheds without one (events are sent
	// asynchronously: a SIGKILL loses those still queued).
	CreatedEvents, DuplicateCreated, MissingCreated int
	Problems                                        []string
}

// The leader-election settings the manager runs with: controller-runtime's
// defaults (manager.Options), which the manager does not change.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// Failover runs scenario 1 once.
func Failover(sc Scale, progress func(string, ...any)) (r FailoverResult, err error) {
	r.Initial, r.DuringKill, r.DuringTerm = sc.FailoverInitial, sc.FailoverDuring, max(1, sc.FailoverDuring/5)
	total := r.Initial + r.DuringKill + r.DuringTerm
	const ns, size = "failover", 3
	env, err := NewEnv("failover", EnvOptions{Pods: total * size, Audit: true}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	if err := env.CreateNamespace(ns); err != nil {
		return r, err
	}
	a, holderA, err := env.StartLeader("manager-a", "")
	if err != nil {
		return r, err
	}
	b, err := env.StartManager("manager-b", "")
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := env.Watch(ctx, ns, total, nil)
	if err != nil {
		return r, err
	}
	if err := env.CreateMemcacheds(ns, "mc", 0, r.Initial, size, 16); err != nil {
		return r, err
	}
	if err := conv.WaitN(r.Initial, sc.Timeout); err != nil {
		return r, err
	}
	env.progress("failover: %d Memcacheds converged under %s; SIGKILL it while %d more are created", r.Initial, holderA, r.DuringKill)

	// Two clients create the next batch; the leader dies a quarter of the
	// way through.
	var created atomic.Int64
	creating := make(chan error, 1)
	go func() {
		creating <- load.CreateConcurrently(env.Config, 2, r.DuringKill, func(c client.Client, i int) error {
			defer created.Add(1)
			return c.Create(context.Background(), load.Memcached(ns, memcachedName("mc", r.Initial+i), size))
		})
	}()
	for created.Load() < int64(max(1, r.DuringKill/4)) {
		time.Sleep(5 * time.Millisecond)
	}
	a.Kill()
	killed := time.Now()
	holderB, at, err := env.WaitLeaseHolder(LeaseDuration+time.Minute, func(h string) bool { return h != "" && h != holderA })
	if err != nil {
		return r, err
	}
	r.KillToLease = at.Sub(killed)
	if err := <-creating; err != nil {
		return r, err
	}
	if err := conv.WaitN(r.Initial+r.DuringKill, sc.Timeout); err != nil {
		return r, err
	}
	r.KillToConverged = time.Since(killed)
	env.progress("failover: standby led after %v, all converged after %v", r.KillToLease.Round(time.Millisecond), r.KillToConverged.Round(time.Millisecond))

	// Graceful: a new standby, SIGTERM to the leader while more arrive.
	if _, err := env.StartManager("manager-a", ""); err != nil {
		return r, err
	}
	go func() {
		creating <- env.CreateMemcacheds(ns, "mc", r.Initial+r.DuringKill, r.DuringTerm, size, 2)
	}()
	terminated := time.Now()
	if err := b.Stop(); err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("the leader did not stop cleanly on SIGTERM: %v", err))
	}
	_, at, err = env.WaitLeaseHolder(LeaseDuration+time.Minute, func(h string) bool { return h != "" && h != holderB })
	if err != nil {
		return r, err
	}
	r.TermToLease = at.Sub(terminated)
	if err := <-creating; err != nil {
		return r, err
	}
	if err := conv.Wait(sc.Timeout); err != nil {
		return r, err
	}
	r.TermToConverged = time.Since(terminated)
	env.progress("failover: SIGTERM handover after %v, all converged after %v", r.TermToLease.Round(time.Millisecond), r.TermToConverged.Round(time.Millisecond))

	r.Problems = append(r.Problems, env.nothingLost(ns, total)...)
	if r.AuditedWrites, r.NonLeaderWrites, err = env.leaderWrites(); err != nil {
		return r, err
	}
	if r.NonLeaderWrites > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d writes were made by a manager that did not hold the Lease", r.NonLeaderWrites))
	}
	if err := r.countCreatedEvents(env, ns, total); err != nil {
		return r, err
	}
	if r.DuplicateCreated > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d duplicate Created events", r.DuplicateCreated))
	}
	return r, nil
}

// closeEnv deletes the env, keeping the first error.
func closeEnv(env *Env, err *error) {
	if cerr := env.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Verb      string `json:"verb"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// leaderWrites reads the audit log: every write by a manager must come from
// the manager that last wrote the Lease successfully (acquired or renewed
// it). A write by another is a second leader.
func (e *Env) leaderWrites() (writes, nonLeader int, err error) {
	f, err := os.Open(filepath.Join(e.Cluster.Workdir, "clusters", e.Cluster.Name, "logs", "audit.log"))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	var events []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, 0, fmt.Errorf("audit log: %w", err)
		}
		if ev.ImpersonatedUser == nil || !strings.HasPrefix(ev.ImpersonatedUser.Username, "system:serviceaccount:"+names.OperatorNamespace+":manager-") {
			continue
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	slices.SortStableFunc(events, func(a, b auditEvent) int { return a.Received.Compare(b.Received) })
	leader := ""
	for _, ev := range events {
		user := ev.ImpersonatedUser.Username
		if ev.ObjectRef.Resource == "leases" {
			if ev.ObjectRef.Name == leaseName && ev.ResponseStatus.Code < 300 {
				leader = user
			}
			continue
		}
		writes++
		if user != leader {
			nonLeader++
		}
	}
	if writes == 0 {
		return 0, 0, fmt.Errorf("the audit log holds no write by the managers")
	}
	return writes, nonLeader, nil
}

// countCreatedEvents reads the "Created" events of the namespace. Each names
// the kinds it created ("created Deployment, Service, PodDisruptionBudget
// mc-00001"); a kind created twice for one Memcached is a duplicate.
func (r *FailoverResult) countCreatedEvents(env *Env, ns string, total int) error {
	list := &eventsv1.EventList{}
	if err := env.Admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return err
	}
	seen := map[string]bool{}
	memcacheds := map[string]bool{}
	for _, ev := range list.Items {
		if ev.Reason != "Created" || ev.Regarding.Kind != "Memcached" {
			continue
		}
		count := 1
		if ev.Series != nil {
			count = int(ev.Series.Count)
		}
		r.CreatedEvents += count
		memcacheds[ev.Regarding.Name] = true
		kinds, _, _ := strings.Cut(strings.TrimPrefix(ev.Note, "created "), " "+ev.Regarding.Name)
		for _, kind := range strings.Split(kinds, ", ") {
			key := ev.Regarding.Name + "/" + kind
			if seen[key] {
				r.DuplicateCreated++
			}
			seen[key] = true
			r.DuplicateCreated += count - 1
		}
	}
	r.MissingCreated = total - len(memcacheds)
	return nil
}
