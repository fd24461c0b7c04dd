package reloader

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"time"
)

// WarmStop makes a pod's memcached keep its items across the pod's stop
// and start (spec.memcached.warmRestart). memcached saves its memory file
// (-e) only on SIGUSR1; on the kubelet's SIGTERM it exits without saving.
// So when the pod stops, the reloader waits out the drain (the memcached
// container's preStop sleep, during which clients stop using the pod),
// sends SIGUSR1 to the memcached whose memory file is memoryFile, and
// waits until it has exited, at most timeout. The memcached container's
// preStop sleeps longer than the drain, so the kubelet's SIGTERM, which
// would make memcached skip the save, comes only after it.
func WarmStop(ctx context.Context, memoryFile string, drain, timeout time.Duration, log *slog.Logger) error {
	log.Info("pod stopping: draining before memcached saves its memory file", "drain", drain.String(), "memoryFile", memoryFile)
	select {
	case <-time.After(drain):
	case <-ctx.Done():
		return ctx.Err()
	}
	start := time.Now()
	match := func(args []string) bool { return takesFile(args, memoryFile, "-e", "--memory-file") }
	pids, err := memcachedPIDs(match)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("no memcached with memory file %s is visible: it has exited already, or the pod does not share its process namespace", memoryFile)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
			return fmt.Errorf("signal memcached (pid %d): %w", pid, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		left, err := memcachedPIDs(match)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			log.Info("memcached saved its memory file and exited", "elapsed", time.Since(start).String())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcached (pid %v) still runs %v after SIGUSR1", left, timeout)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
