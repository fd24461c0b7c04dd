// Command coredns is CoreDNS with the plugins the local cluster's DNS uses
// and nothing else: kubernetes answers cluster.local from the API, the rest
// are the ones kubeadm's default Corefile lists. There is no forward plugin
// on purpose: the local cluster's pods have no route off the machine, so
// names outside the cluster are answered NXDOMAIN/SERVFAIL at once instead
// of timing out. Plugins run in CoreDNS's own order (its plugin.cfg), not the
// order of these imports.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
