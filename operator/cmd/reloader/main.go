// Command reloader is the sidecar of a Memcached with spec.security or warm
// restart (package reloader says what it does). The operator writes it
// into the pod with its own image, where it sits beside the manager as
// /reloader, so the two always come from one build. It is a binary of its
// own, of the standard library alone, so that each cache pod pays for a
// few megabytes rather than for the whole manager (docs/benchmarks.md
// measures both).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example/memcached-operator/operator/internal/buildinfo"
	"github.com/example/memcached-operator/operator/internal/reloader"
)

// version is set at build time with -ldflags "-X main.version=...", as the
// manager's is.
var version = ""

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("reloader", flag.ExitOnError)
	var cfg reloader.Config
	fs.StringVar(&cfg.TLSDir, "tls-dir", "", "Mounted TLS Secret (tls.crt, tls.key, optional ca.crt) to load with refresh_certs when it changes.")
	fs.StringVar(&cfg.AuthFile, "auth-file", "", "Mounted memcached password file to load with SIGHUP when it changes.")
	fs.StringVar(&cfg.Address, "memcached-address", "127.0.0.1:11210", "memcached's plaintext listener inside the pod.")
	fs.StringVar(&cfg.ExporterListenAddress, "exporter-listen-address", "", "Where the exporter connects, when memcached requires auth: each connection is authenticated with the password file's first entry and relayed to memcached.")
	fs.DurationVar(&cfg.Interval, "interval", 2*time.Second, "How often to look at the files.")
	fs.StringVar(&cfg.MemoryFile, "memory-file", "", "memcached's memory file (-e): when the pod stops, wait --drain, then make memcached save it (SIGUSR1) and wait until it exits.")
	drain := fs.Duration("drain", 5*time.Second, "With --memory-file: how long the pod keeps serving after it was told to stop (the memcached container's preStop sleep).")
	saveTimeout := fs.Duration("save-timeout", 5*time.Second, "With --memory-file: how long memcached may take to save and exit (the rest of its preStop sleep).")
	_ = fs.Parse(args)
	cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	stopping, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg.Log.Info("watching", "tlsDir", cfg.TLSDir, "authFile", cfg.AuthFile, "memoryFile", cfg.MemoryFile, "memcached", cfg.Address, "interval", cfg.Interval.String(), "version", buildinfo.Version(version))

	// The reloader keeps running through the drain: a pod told to stop
	// still serves, and a rotation may land meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- reloader.Run(ctx, cfg) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "reload:", err)
			return 2
		}
		return 0
	case <-stopping.Done():
	}
	code := 0
	if cfg.MemoryFile != "" {
		if err := reloader.WarmStop(context.Background(), cfg.MemoryFile, *drain, *saveTimeout, cfg.Log); err != nil {
			cfg.Log.Error("warm stop", "err", err)
			code = 1
		}
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "reload:", err)
		return 2
	}
	return code
}
