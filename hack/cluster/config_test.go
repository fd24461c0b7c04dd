package cluster

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestNetworkAddresses(t *testing.T) {
	for _, tc := range []struct {
		slot, node                               int
		bridge, veth, hostIP, nodeIP, pods, cidr string
	}{
		{0, 1, "mcop0", "mcop0n1", "10.200.255.1", "10.200.255.11", "10.200.1.0/24", "10.200.0.0/17"},
		{7, 3, "mcop7", "mcop7n3", "10.207.255.1", "10.207.255.13", "10.207.3.0/24", "10.207.0.0/17"},
		{MaxSlots - 1, MaxRealNodes, "mcop49", "mcop49n100", "10.249.255.1", "10.249.255.110", "10.249.100.0/24", "10.249.0.0/17"},
	} {
		n := Network{Slot: tc.slot}
		if err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		got := []string{n.Bridge(), n.HostVeth(tc.node), n.HostIP().String(), n.NodeIP(tc.node).String(), n.PodCIDR(tc.node).String(), n.ClusterCIDR().String()}
		want := []string{tc.bridge, tc.veth, tc.hostIP, tc.nodeIP, tc.pods, tc.cidr}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("slot %d node %d: got %v, want %v", tc.slot, tc.node, got, want)
				break
			}
		}
		if len(n.HostVeth(tc.node)) > 15 {
			t.Errorf("%s is longer than an interface name may be", n.HostVeth(tc.node))
		}
		// Everything of the cluster is in its /16, the pods in the cluster
		// CIDR, and the fabric outside it.
		for _, p := range []netip.Prefix{n.Fabric(), n.PodCIDR(tc.node), n.ClusterCIDR()} {
			if !n.Prefix().Contains(p.Addr()) {
				t.Errorf("%s is outside %s", p, n.Prefix())
			}
		}
		if !n.ClusterCIDR().Contains(n.PodCIDR(tc.node).Addr()) || n.ClusterCIDR().Contains(n.NodeIP(tc.node)) {
			t.Errorf("pods %s or node %s on the wrong side of %s", n.PodCIDR(tc.node), n.NodeIP(tc.node), n.ClusterCIDR())
		}
	}
	for _, bad := range []int{-1, MaxSlots} {
		if err := (Network{Slot: bad}).Validate(); err == nil {
			t.Errorf("slot %d accepted", bad)
		}
	}
}

func testNode() Node {
	return Node{Name: "node-2", Index: 2, Net: Network{Slot: 3}, Dir: "/work/nodes/x/node-2", APIServer: "https://10.203.255.1:32765", PauseImage: "localhost/pause:local"}
}

func TestCNIConfigRoutesOnlyTheCluster(t *testing.T) {
	b, err := testNode().CNIConfig()
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type   string `json:"type"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				DataDir string                `json:"dataDir"`
				Ranges  [][]map[string]string `json:"ranges"`
				Routes  []map[string]string   `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	p := conf.Plugins[0]
	if p.Type != "bridge" || p.IPMasq {
		t.Errorf("plugin %s with ipMasq %v: want a bridge without masquerade", p.Type, p.IPMasq)
	}
	if got := p.IPAM.Ranges[0][0]["subnet"]; got != "10.203.2.0/24" {
		t.Errorf("pod range %s", got)
	}
	var dsts []string
	for _, r := range p.IPAM.Routes {
		dsts = append(dsts, r["dst"])
	}
	if strings.Join(dsts, " ") != "10.203.0.0/16 "+ServiceCIDR {
		t.Errorf("routes %v: want only the cluster's range and the Services, no default route", dsts)
	}
	if !strings.HasPrefix(p.IPAM.DataDir, "/run/") {
		t.Errorf("IPAM state in %s, outside the node's private /run", p.IPAM.DataDir)
	}
}

func TestKubeletConfig(t *testing.T) {
	b, err := testNode().KubeletConfig()
	if err != nil {
		t.Fatal(err)
	}
	var c kubeletv1beta1.KubeletConfiguration
	if err := sigsyaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatal(err)
	}
	checks := map[string]bool{
		"no anonymous access":            c.Authentication.Anonymous.Enabled != nil && !*c.Authentication.Anonymous.Enabled,
		"webhook authorization":          c.Authorization.Mode == kubeletv1beta1.KubeletAuthorizationModeWebhook,
		"client CA":                      c.Authentication.X509.ClientCAFile == "/work/nodes/x/node-2/pki/ca.crt",
		"no read-only port":              c.ReadOnlyPort == 0,
		"cgroupfs with its own root":     c.CgroupDriver == "cgroupfs" && c.CgroupRoot == "/memcached-operator-node-3-2",
		"cgroup v1 and swap allowed":     c.FailCgroupV1 != nil && !*c.FailCgroupV1 && c.FailSwapOn != nil && !*c.FailSwapOn,
		"cluster DNS":                    len(c.ClusterDNS) == 1 && c.ClusterDNS[0] == DNSServiceIP && c.ClusterDomain == ClusterDomain,
		"listens on the node's address":  c.Address == "10.203.255.12",
		"images never garbage-collected": *c.ImageGCHighThresholdPercent == 100,
		"volume plugins in the node":     strings.HasPrefix(c.VolumePluginDir, "/var/lib/kubelet/"),
		"its own containerd":             c.ContainerRuntimeEndpoint == "unix:///run/containerd/containerd.sock",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("kubelet config: not %s:\n%s", what, b)
		}
	}
}

func TestKubeProxyConfigLeavesMachineConntrackAlone(t *testing.T) {
	b, err := testNode().KubeProxyConfig()
	if err != nil {
		t.Fatal(err)
	}
	var c kubeproxyv1alpha1.KubeProxyConfiguration
	if err := sigsyaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatal(err)
	}
	ct := c.Conntrack
	if *ct.MaxPerCore != 0 || *ct.Min != 0 || ct.TCPEstablishedTimeout.Duration != 0 || ct.TCPCloseWaitTimeout.Duration != 0 {
		t.Errorf("conntrack %+v: kube-proxy would change machine-wide settings", ct)
	}
	if c.Mode != "iptables" || c.ClusterCIDR != "10.203.0.0/17" || c.HostnameOverride != "node-2" {
		t.Errorf("mode %s, cluster CIDR %s, hostname %s", c.Mode, c.ClusterCIDR, c.HostnameOverride)
	}
}

func TestContainerdConfig(t *testing.T) {
	c := testNode().ContainerdConfig()
	for _, want := range []string{
		"restrict_oom_score_adj = true", `sandbox_image = "localhost/pause:local"`, "SystemdCgroup = false",
		`BinaryName = "/usr/sbin/runc"`, `conf_dir = "/work/nodes/x/node-2/cni"`, `address = "/run/containerd/containerd.sock"`,
		`config_path = "/work/nodes/x/node-2/certs.d"`,
	} {
		if !strings.Contains(c, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, c)
		}
	}
}

// The node pulls from its registry over plain HTTP, and only pulls: no
// push, and no HTTPS attempt that would fail first.
func TestRegistryHosts(t *testing.T) {
	n := testNode()
	n.Registry = "10.203.255.1:5000"
	var hosts struct {
		Server string `toml:"server"`
		Host   map[string]struct {
			Capabilities []string `toml:"capabilities"`
		} `toml:"host"`
	}
	if _, err := toml.Decode(n.RegistryHosts(), &hosts); err != nil {
		t.Fatal(err)
	}
	if hosts.Server != "http://10.203.255.1:5000" || len(hosts.Host) != 1 ||
		!slices.Equal(hosts.Host["http://10.203.255.1:5000"].Capabilities, []string{"pull", "resolve"}) {
		t.Errorf("hosts.toml: %+v", hosts)
	}
}

func TestCoreDNSObjects(t *testing.T) {
	var svc *corev1.Service
	var dep *appsv1.Deployment
	for _, o := range CoreDNSObjects("localhost/coredns:v1.15.0") {
		switch o := o.(type) {
		case *corev1.Service:
			svc = o
		case *appsv1.Deployment:
			dep = o
		}
	}
	if svc == nil || svc.Spec.ClusterIP != DNSServiceIP || svc.Name != "kube-dns" {
		t.Fatalf("kube-dns Service: %+v", svc)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port != 53 || p.TargetPort.IntVal != CoreDNSPort {
			t.Errorf("port %+v: want 53 to %d", p, CoreDNSPort)
		}
	}
	pod := dep.Spec.Template.Spec
	if pod.DNSPolicy != corev1.DNSDefault || !*pod.SecurityContext.RunAsNonRoot || pod.Containers[0].Image != "localhost/coredns:v1.15.0" {
		t.Errorf("CoreDNS pod: %+v", pod)
	}
	if strings.Contains(Corefile(), "forward") {
		t.Error("the Corefile forwards: the cluster has no upstream")
	}
	if _, err := YAMLStream(CoreDNSObjects("x")); err != nil {
		t.Fatal(err)
	}
}

// The failing checks are read from kubectl's error, as CI saw it while a
// loaded apiserver was still bootstrapping its roles.
func TestFailingHealthChecks(t *testing.T) {
	out := `Error from server (InternalError): an error on the server ("[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n[+]poststarthook/bootstrap-controller ok\n[-]poststarthook/start-service-ip-repair-controllers failed: reason withheld\nhealthz check failed") has prevented the request from succeeding`
	if got, want := failingHealthChecks(out), "poststarthook/rbac/bootstrap-roles, poststarthook/start-service-ip-repair-controllers"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := failingHealthChecks("The connection to the server 127.0.0.1:32766 was refused\n"), "no answer: The connection to the server 127.0.0.1:32766 was refused"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
