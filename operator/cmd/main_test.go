package main

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

func TestSoftMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		gomemlimit, memoryLimit string
		ratio                   float64
		want                    int64
		wantSet                 bool
	}{
		{"90% of the container limit", "", "134217728", 0.9, 120795955, true},
		{"GOMEMLIMIT wins", "100MiB", "134217728", 0.9, 0, false},
		{"no limit known", "", "", 0.9, 0, false},
		{"disabled", "", "134217728", 0, 0, false},
		{"garbage", "", "lots", 0.9, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, set := softMemoryLimit(tt.gomemlimit, tt.memoryLimit, tt.ratio)
			if got != tt.want || set != tt.wantSet {
				t.Errorf("softMemoryLimit() = %d, %v; want %d, %v", got, set, tt.want, tt.wantSet)
			}
		})
	}
}

func TestRateLimits(t *testing.T) {
	for _, tt := range []struct {
		name      string
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{"unlimited by default: the apiserver's fairness throttles", 0, 0, 0, 0},
		{"burst defaults to twice the rate", 50, 0, 50, 100},
		{"both given", 100, 300, 100, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &rest.Config{}
			applyRateLimits(cfg, tt.qps, tt.burst)
			if cfg.QPS != tt.wantQPS || cfg.Burst != tt.wantBurst {
				t.Errorf("QPS, Burst = %v, %d; want %v, %d", cfg.QPS, cfg.Burst, tt.wantQPS, tt.wantBurst)
			}
		})
	}
}

func TestFlagDefaults(t *testing.T) {
	o := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), nil)
	if o.gracefulShutdownTimeout != 15*time.Second {
		t.Errorf("graceful shutdown timeout %v, want 15s (deploy/manager's terminationGracePeriodSeconds is 30)", o.gracefulShutdownTimeout)
	}
	if o.exporterImage != defaultExporterImage || o.memcachedImage != defaultMemcachedImage {
		t.Errorf("images %s, %s", o.memcachedImage, o.exporterImage)
	}
}

// A manager started while the apiserver is down waits for it (with
// back-off) instead of exiting into a crash loop, and stops waiting when
// it is stopped.
func TestWaitForAPIServer(t *testing.T) {
	apiServerRetryMin, apiServerRetryMax = time.Millisecond, 5*time.Millisecond
	var calls atomic.Int32
	down := 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(calls.Add(1)) <= down {
			http.Error(w, "etcd is unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","groups":[]}`))
		}
	}))
	defer srv.Close()
	if err := waitForAPIServer(context.Background(), &rest.Config{Host: srv.URL}, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if calls.Load() <= int32(down) {
		t.Errorf("returned after %d calls, before the apiserver answered", calls.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	unreachable := &rest.Config{Host: "http://127.0.0.1:1"}
	if err := waitForAPIServer(ctx, unreachable, logr.Discard()); err == nil {
		t.Error("a stopped manager must not wait forever")
	}
}
