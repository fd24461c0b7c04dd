package load

import (
	"fmt"
	"time"
)

// IdleWait says when a manager counts as idle: its memcached queue is
// empty and nothing happened for Quiet, after at least MinReconciles
// reconciles since it started.
type IdleWait struct {
	// Scrape reads the manager's metrics.
	Scrape func() (Metrics, error)
	// CPUSeconds, when set, is read with each scrape; WaitIdle returns its
	// value at the start of the quiet period, so the scrapes made while
	// waiting count as little as they can.
	CPUSeconds func() (float64, error)
	// MinReconciles is how many reconciles must have finished.
	MinReconciles int
	// Quiet is how long nothing must happen; Poll how often to look (each
	// scrape costs the manager tens of milliseconds of CPU at N=10,000).
	Quiet, Poll time.Duration
	// CountRequests counts the manager's API requests as activity too: the
	// event recorder sends its events after the reconcile has returned.
	CountRequests bool
}

// WaitIdle waits until the manager is idle as w says, and returns the
// metrics and CPU seconds from the start of its quiet period.
func WaitIdle(w IdleWait, timeout time.Duration) (Metrics, float64, error) {
	deadline := time.Now().Add(timeout)
	lastReconciles, lastRequests := -1.0, -1.0
	var quiet Metrics
	var quietCPU float64
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		s, err := w.Scrape()
		var cpu float64
		if err == nil && w.CPUSeconds != nil {
			cpu, err = w.CPUSeconds()
		}
		if err == nil {
			reconciles, requests := s.Reconciles(), 0.0
			if w.CountRequests {
				requests = s.Requests().Total()
			}
			depth := s.Sum("workqueue_depth", map[string]string{"name": "memcached"})
			switch {
			case reconciles != lastReconciles || requests != lastRequests || depth > 0:
				lastReconciles, lastRequests, quietSince = reconciles, requests, time.Now()
				quiet, quietCPU = s, cpu
			case reconciles >= float64(w.MinReconciles) && time.Since(quietSince) > w.Quiet:
				return quiet, quietCPU, nil
			}
		}
		time.Sleep(w.Poll)
	}
	return nil, 0, fmt.Errorf("no idle manager within %v (%d reconciles wanted, then %v without activity)", timeout, w.MinReconciles, w.Quiet)
}
