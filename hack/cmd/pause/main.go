// Command pause is the pod sandbox of the local cluster's real nodes: the
// process that holds a pod's namespaces. It does what Kubernetes' pause
// does: sleeps until told to stop and, as the pod's PID 1 when the pod
// shares its process namespace, reaps orphaned children.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
