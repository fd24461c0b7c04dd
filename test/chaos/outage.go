package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// OutageResult is scenario 2: the control plane stopped while Memcacheds
// converge.
type OutageResult struct {
	Target string
	CRs    int
	Outage time.Duration
	// ConvergedAtStop is how many had converged when it stopped.
	ConvergedAtStop int
	// The manager's requests per second while the control plane was down:
	// mean, and the highest over one second.
	MeanRPS, PeakRPS float64
	// ManagerExits lists how the manager exited (and was restarted, as the
	// kubelet would) during the run.
	ManagerExits []string
	// BackToConverged runs from the restart of the control plane until
	// every Memcached has converged.
	BackToConverged time.Duration
	Problems        []string
}

// OutageTargets are what scenario 2 stops, in turn.
var OutageTargets = [][]string{{"kube-apiserver"}, {"etcd"}, {"kube-apiserver", "etcd"}}

// hotLoopRPS is the request rate during an outage above which the manager
// counts as hot-looping: its informers, leader election and back-off
// together stay far below it, a retry loop without back-off far above.
const hotLoopRPS = 20

// Outage runs scenario 2 once for one target.
func Outage(sc Scale, target []string, progress func(string, ...any)) (r OutageResult, err error) {
	r.Target, r.CRs, r.Outage = strings.Join(target, " and "), sc.OutageCRs, sc.Outage
	const ns, size = "outage", 1
	env, err := NewEnv("outage", EnvOptions{Pods: r.CRs * size, ComponentArgs: map[string][]string{
		// kube-controller-manager and kube-scheduler exit when they lose
		// their own leader election, and kwokctl's binary runtime does not
		// restart them as a kubelet restarts static pods: without election
		// they ride out the outage, and the figures are the operator's.
		"kube-controller-manager": {"leader-elect=false"},
		"kube-scheduler":          {"leader-elect=false"},
	}}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	if err := env.CreateNamespace(ns); err != nil {
		return r, err
	}
	var components []*component
	for _, name := range target {
		c, err := env.Component(name)
		if err != nil {
			return r, err
		}
		components = append(components, c)
	}
	m, _, err := env.StartLeader("manager-a", "")
	if err != nil {
		return r, err
	}
	m.Supervise()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := env.Watch(ctx, ns, r.CRs, nil)
	if err != nil {
		return r, err
	}
	if err := env.CreateMemcacheds(ns, "mc", 0, r.CRs, size, 16); err != nil {
		return r, err
	}
	// In the middle of converging: a quarter done.
	if err := conv.WaitN(max(1, r.CRs/4), sc.Timeout); err != nil {
		return r, err
	}
	r.ConvergedAtStop = conv.Converged()
	for _, c := range components {
		if err := c.Stop(); err != nil {
			return r, err
		}
	}
	stopped := time.Now()
	env.progress("outage: stopped %s with %d of %d Memcacheds converged", r.Target, r.ConvergedAtStop, r.CRs)
	time.Sleep(r.Outage)
	// The first second still sees requests that were in flight.
	r.MeanRPS, r.PeakRPS = m.RequestRate(stopped.Add(time.Second), time.Now())
	for i := len(components) - 1; i >= 0; i-- {
		if err := components[i].Start(); err != nil {
			return r, err
		}
	}
	restarted := time.Now()
	// A deadline for a hang, not a figure: a restarted etcd replays its
	// log and the apiserver re-lists every resource before /readyz passes,
	// which took over two minutes once when CI ran this next to the other
	// packages on 2 cores.
	if err := env.WaitAPIServer(5 * time.Minute); err != nil {
		return r, err
	}
	if err := conv.Wait(sc.Timeout); err != nil {
		return r, fmt.Errorf("after the outage of %s: %w", r.Target, err)
	}
	r.BackToConverged = time.Since(restarted)
	r.ManagerExits = m.Exits()
	env.progress("outage: %s back, all converged after %v; manager made %.1f requests/s (peak %.1f) while it was down, exited %d times",
		r.Target, r.BackToConverged.Round(time.Millisecond), r.MeanRPS, r.PeakRPS, len(r.ManagerExits))
	// Losing the Lease ends the process once; a process started while the
	// control plane is down must wait for it, not exit again.
	if len(r.ManagerExits) > 1 {
		r.Problems = append(r.Problems, fmt.Sprintf("the manager exited %d times while %s was down: a crash loop (%s)",
			len(r.ManagerExits), r.Target, r.ManagerExits[len(r.ManagerExits)-1]))
	}
	if r.PeakRPS > hotLoopRPS {
		r.Problems = append(r.Problems, fmt.Sprintf("the manager made up to %.0f requests/s while %s was down: a hot loop", r.PeakRPS, r.Target))
	}
	r.Problems = append(r.Problems, env.nothingLost(ns, r.CRs)...)
	return r, nil
}
