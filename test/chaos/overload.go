package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/proc"
)

// OverloadResult is scenario 7: as many Memcacheds as fast as many
// clients can create them, on a control plane whose flow control is sized
// so that it pushes back.
type OverloadResult struct {
	CRs, Clients int
	// Converged runs from the first create until every Memcached is Ready.
	Converged time.Duration
	// Throttled are the manager's requests the apiserver answered with 429;
	// TenantRetries the creates retried after a 429.
	Throttled, TenantRetries int
	Requests                 int
	PeakRSSMiB               float64
	// ErrorsInStatus are the Memcacheds that ever showed an error
	// condition (Degraded=True).
	ErrorsInStatus []string
	Problems       []string
}

// The apiserver's concurrency limits in scenario 7: a tenth of the
// defaults (400 and 200), so that API Priority and Fairness queues and
// rejects on a 2-core machine as it does on a busy production cluster.
const (
	overloadMaxInflight         = 40
	overloadMaxMutatingInflight = 20
)

// Overload runs scenario 7.
func Overload(sc Scale, progress func(string, ...any)) (r OverloadResult, err error) {
	r.CRs, r.Clients = sc.OverloadCRs, sc.OverloadClients
	const ns, size = "overload", 1
	env, err := NewEnv("overload", EnvOptions{Pods: r.CRs * size, ComponentArgs: map[string][]string{
		"kube-apiserver": {
			fmt.Sprintf("max-requests-inflight=%d", overloadMaxInflight),
			fmt.Sprintf("max-mutating-requests-inflight=%d", overloadMaxMutatingInflight),
		},
		// The scheduler must keep up with 5,000 pods (its default client
		// limit is 50 requests/s).
		"kube-scheduler": {"kube-api-qps=500"},
	}}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	if err := env.CreateNamespace(ns); err != nil {
		return r, err
	}
	tenant, err := env.tenantConfig()
	if err != nil {
		return r, err
	}
	m, _, err := env.StartLeader("manager-a", "")
	if err != nil {
		return r, err
	}
	var mu sync.Mutex
	degraded := map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := env.Watch(ctx, ns, r.CRs, func(u *unstructured.Unstructured) {
		if degradedField(u, "status") == "True" {
			mu.Lock()
			degraded[u.GetName()] = degradedField(u, "message")
			mu.Unlock()
		}
	})
	if err != nil {
		return r, err
	}
	start := time.Now()
	var retries sync.Map
	if err := load.CreateConcurrently(tenant, r.Clients, r.CRs, func(c client.Client, i int) error {
		for {
			err := c.Create(context.Background(), load.Memcached(ns, memcachedName("mc", i), size))
			if !apierrors.IsTooManyRequests(err) {
				return err
			}
			n, _ := retries.LoadOrStore(i, new(int))
			*n.(*int)++
		}
	}); err != nil {
		return r, err
	}
	env.progress("overload: %d Memcacheds created by %d clients in %v", r.CRs, r.Clients, time.Since(start).Round(time.Millisecond))
	if err := conv.Wait(sc.Timeout); err != nil {
		// What the manager did meanwhile: its exits and its last lines.
		return r, fmt.Errorf("%w\n%s\nmanager exits: %q\nmanager log:\n%s", err, env.describe(ns, conv.Pending(2)), m.Exits(), m.current().Tail(40))
	}
	r.Converged = time.Since(start)
	r.Throttled = m.Throttled(start, time.Now())
	r.Requests = m.Requests(start, time.Now())
	retries.Range(func(_, v any) bool { r.TenantRetries += *v.(*int); return true })
	r.PeakRSSMiB, _ = proc.PeakRSSMiB(m.current().PID())
	mu.Lock()
	for name, msg := range degraded {
		r.ErrorsInStatus = append(r.ErrorsInStatus, name+": "+msg)
	}
	mu.Unlock()
	env.progress("overload: converged in %v; manager got %d 429s of %d requests, peak RSS %.0f MiB; %d Memcacheds showed an error",
		r.Converged.Round(time.Millisecond), r.Throttled, r.Requests, r.PeakRSSMiB, len(r.ErrorsInStatus))
	for i, e := range r.ErrorsInStatus {
		if i == 5 {
			r.Problems = append(r.Problems, fmt.Sprintf("... and %d more Memcacheds showed an error", len(r.ErrorsInStatus)-5))
			break
		}
		r.Problems = append(r.Problems, "an error surfaced in status: "+e)
	}
	r.Problems = append(r.Problems, env.nothingLost(ns, r.CRs)...)
	return r, nil
}
