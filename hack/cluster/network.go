package cluster

import (
	"fmt"
	"net/netip"
)

// The addresses every local cluster with real nodes shares: they live only
// inside its nodes' network namespaces (kube-proxy's rules), so clusters
// side by side do not collide.
const (
	ServiceCIDR  = "10.96.0.0/16"
	DNSServiceIP = "10.96.0.10"
	// KubernetesServiceIP is the kubernetes Service's: the first of
	// ServiceCIDR.
	KubernetesServiceIP = "10.96.0.1"
	ClusterDomain       = "cluster.local"
	// MaxSlots is how many clusters with real nodes one machine can hold
	// at once: slot s owns 10.(200+s).0.0/16.
	MaxSlots = 50
	// MaxRealNodes per cluster: node i's pods get 10.(200+s).i.0/24.
	MaxRealNodes = 100
)

// Network is the addressing of one cluster's real nodes, all inside
// 10.(200+Slot).0.0/16:
//
//	10.X.255.1/24   the host's end of the fabric bridge; the apiserver
//	                advertises it, and the nodes reach the control plane
//	                on it
//	10.X.255.(10+i) node i, in its own network namespace
//	10.X.i.0/24     node i's pods, on the node's own bridge (cni0)
//
// The host routes each node's pod range to the node, and each node routes
// the others' the same way; nothing routes beyond the /16, so no packet
// of the cluster leaves the machine.
type Network struct {
	// Slot picks the /16; one per cluster on the machine.
	Slot int
}

func (n Network) octet() int { return 200 + n.Slot }

// Validate says what is wrong with the slot.
func (n Network) Validate() error {
	if n.Slot < 0 || n.Slot >= MaxSlots {
		return fmt.Errorf("network slot %d: want 0 to %d", n.Slot, MaxSlots-1)
	}
	return nil
}

// Prefix is the cluster's whole range.
func (n Network) Prefix() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet()), 0, 0}), 16)
}

// ClusterCIDR holds the pod ranges of every node (kube-proxy's
// --cluster-cidr).
func (n Network) ClusterCIDR() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet()), 0, 0}), 17)
}

// Fabric is the subnet of the bridge that joins the host and the nodes.
func (n Network) Fabric() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet()), 255, 0}), 24)
}

// HostIP is the host's address on the fabric.
func (n Network) HostIP() netip.Addr { return netip.AddrFrom4([4]byte{10, byte(n.octet()), 255, 1}) }

// NodeIP is node i's address (i from 1).
func (n Network) NodeIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(n.octet()), 255, byte(10 + i)})
}

// PodCIDR is node i's pod range.
func (n Network) PodCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet()), byte(i), 0}), 24)
}

// Bridge is the host's fabric bridge; interface names are at most 15 bytes.
func (n Network) Bridge() string { return fmt.Sprintf("mcop%d", n.Slot) }

// HostVeth is the host's end of node i's link, and Netns the node's
// network namespace (under /run/netns).
func (n Network) HostVeth(i int) string { return fmt.Sprintf("mcop%dn%d", n.Slot, i) }

// Netns is node i's network namespace.
func (n Network) Netns(i int) string { return fmt.Sprintf("mcop%dn%d", n.Slot, i) }

// CgroupRoot is node i's kubelet cgroupRoot, in every cgroup hierarchy.
func (n Network) CgroupRoot(i int) string {
	return fmt.Sprintf("/memcached-operator-node-%d-%d", n.Slot, i)
}
