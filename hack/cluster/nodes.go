package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Binaries are the programs a real node runs: the kubelet and kube-proxy
// from bin/, containerd, runc and the CNI plugins from the machine.
type Binaries struct {
	Kubelet, KubeProxy string
}

// NodePreflight says what this machine lacks for real nodes, in one line
// naming the fix; nil when it has everything.
func NodePreflight(bins Binaries) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (network namespaces, mounts, cgroups)")
	}
	var missing []string
	for _, p := range []string{bins.Kubelet, bins.KubeProxy} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, filepath.Base(p)+" (make tools)")
		}
	}
	for _, c := range []string{"containerd", "ctr", "ip", "nsenter", "unshare", "iptables", runcBinary, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c+" (make test-deps)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s", strings.Join(missing, ", "))
	}
	return nil
}

func (n Node) pidFile(component string) string { return n.path("pids", component+".pid") }

func (n Node) pid(component string) int {
	b, err := os.ReadFile(n.pidFile(component))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// PIDs are the node's own processes (not its pods').
func (n Node) PIDs() []int {
	var out []int
	for _, c := range []string{"kube-proxy", "kubelet", "containerd", "namespace"} {
		if pid := n.pid(c); Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Running says whether every process of the node is alive.
func (n Node) Running() bool { return len(n.PIDs()) == 4 }

// writeFiles writes the node's configuration and certificates into Dir.
func (n Node) writeFiles(ca *CA) error {
	for _, d := range []string{"pki", "cni", "logs", "pids"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	ip := n.Net.NodeIP(n.Index).AsSlice()
	for name, id := range map[string]Identity{
		"kubelet-client":  {CommonName: "system:node:" + n.Name, Organizations: []string{"system:nodes"}},
		"kubelet-serving": {CommonName: "system:node:" + n.Name, Organizations: []string{"system:nodes"}, IPs: []net.IP{ip}, DNSNames: []string{n.Name}, Server: true},
		"kube-proxy":      {CommonName: "system:kube-proxy"},
	} {
		if err := ca.Issue(n.path("pki"), name, id); err != nil {
			return err
		}
	}
	files := map[string][]byte{
		"pki/ca.crt":             ca.CertPEM,
		"containerd.toml":        []byte(n.ContainerdConfig()),
		"resolv.conf":            []byte(ResolvConf()),
		"kubelet.kubeconfig":     []byte(Kubeconfig(n.APIServer, n.path("pki", "ca.crt"), n.path("pki", "kubelet-client.crt"), n.path("pki", "kubelet-client.key"))),
		"kube-proxy.kubeconfig":  []byte(Kubeconfig(n.APIServer, n.path("pki", "ca.crt"), n.path("pki", "kube-proxy.crt"), n.path("pki", "kube-proxy.key"))),
		"cni/10-local.conflist":  nil,
		"kubelet-config.yaml":    nil,
		"kube-proxy-config.yaml": nil,
	}
	var err error
	if files["cni/10-local.conflist"], err = n.CNIConfig(); err != nil {
		return err
	}
	if files["kubelet-config.yaml"], err = n.KubeletConfig(); err != nil {
		return err
	}
	if files["kube-proxy-config.yaml"], err = n.KubeProxyConfig(); err != nil {
		return err
	}
	if n.Registry != "" {
		if err := os.MkdirAll(n.path("certs.d", n.Registry), 0o755); err != nil {
			return err
		}
		files[filepath.Join("certs.d", n.Registry, "hosts.toml")] = []byte(n.RegistryHosts())
	}
	for name, b := range files {
		if err := os.WriteFile(n.path(name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// createNetwork gives the node its network namespace, linked to the
// fabric bridge, with loopback up and forwarding on (it routes for its
// pods); the host routes the node's pod range to it.
func (n Node) createNetwork() error {
	ns, veth, ipAddr := n.Net.Netns(n.Index), n.Net.HostVeth(n.Index), n.Net.NodeIP(n.Index).String()
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", veth, "master", n.Net.Bridge(), "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "addr", "add", ipAddr + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		// The node's own programs (host-network pods) reach Services as
		// pods do, by kube-proxy's DNAT; the route only lets the kernel
		// pick a source address first. The host does not forward, so
		// nothing sent this way leaves the machine.
		{"-n", ns, "route", "add", ServiceCIDR, "via", n.Net.HostIP().String()},
		{"route", "replace", n.Net.PodCIDR(n.Index).String(), "via", ipAddr},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// Per network namespace: this changes the node's, not the machine's.
	return exec.Command("nsenter", "--net=/run/netns/"+ns, "sysctl", "-qw", "net.ipv4.ip_forward=1").Run()
}

// routeTo makes the node route other's pods to other.
func (n Node) routeTo(other Node) error {
	return ip("-n", n.Net.Netns(n.Index), "route", "replace", other.Net.PodCIDR(other.Index).String(), "via", other.Net.NodeIP(other.Index).String())
}

// spawn starts a long-running component of the node, detached (it outlives
// `make cluster-up`), logging to logs/<component>.log.
func (n Node) spawn(component string, args ...string) error {
	log, err := os.OpenFile(n.path("logs", component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", component, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it dies while this process lives (tests); when `make
	// cluster-up` exits, init does.
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(n.pidFile(component), []byte(strconv.Itoa(pid)), 0o644)
}

// inNode is a command line run inside the node's network and mount
// namespaces.
func (n Node) inNode(args ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(n.pid("namespace")), "--mount", "--net", "--"}, args...)
}

// startNamespace starts the process that holds the node's mount namespace:
// a private (slave) copy of the machine's mounts, with a tmpfs on /run and
// the node's own /var/lib and /var/log, so containerd and the kubelet use
// their default paths, their mounts never reach the machine, and all of
// them go with the last process of the node.
func (n Node) startNamespace() error {
	script := "mount -t tmpfs -o mode=0755 node-run /run && "
	for _, d := range boundDirs {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
		script += fmt.Sprintf("mount --bind %s %s && ", n.path(d), d)
	}
	// It signals readiness by creating a file the host can see.
	script += fmt.Sprintf("touch %s && exec sleep infinity", n.path("pids", "namespace.ready"))
	_ = os.Remove(n.path("pids", "namespace.ready"))
	if err := n.spawn("namespace", "nsenter", "--net=/run/netns/"+n.Net.Netns(n.Index), "--",
		"unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script); err != nil {
		return err
	}
	return waitFor(10*time.Second, "the node's mount namespace", func() error {
		if !Alive(n.pid("namespace")) {
			return errors.New("its process exited; see " + n.path("logs", "namespace.log"))
		}
		_, err := os.Stat(n.path("pids", "namespace.ready"))
		return err
	})
}

// startContainerd starts the node's containerd and waits for its socket.
func (n Node) startContainerd() error {
	if err := n.spawn("containerd", n.inNode("containerd", "--config", n.path("containerd.toml"))...); err != nil {
		return err
	}
	return waitFor(30*time.Second, "containerd", func() error {
		if !Alive(n.pid("containerd")) {
			return errors.New("it exited; see " + n.path("logs", "containerd.log"))
		}
		args := n.inNode("ctr", "--address", containerdSocket, "version")
		return exec.Command(args[0], args[1:]...).Run()
	})
}

// ImportImages loads an image archive (docker save format) into the node's
// containerd, where the kubelet finds its images without pulling.
func (n Node) ImportImages(ctx context.Context, archive string) error {
	args := n.inNode("ctr", "--address", containerdSocket, "--namespace", "k8s.io", "images", "import", "--no-unpack=false", archive)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into %s: %w\n%s", archive, n.Name, err, out)
	}
	return nil
}

// startKubelet starts the node's kubelet and kube-proxy.
func (n Node) startKubelet() error {
	if err := createCgroup(n.Net.CgroupRoot(n.Index)); err != nil {
		return err
	}
	ipAddr := n.Net.NodeIP(n.Index).String()
	if err := n.spawn("kubelet", n.inNode(n.Bins.Kubelet,
		"--config="+n.path("kubelet-config.yaml"),
		"--kubeconfig="+n.path("kubelet.kubeconfig"),
		"--hostname-override="+n.Name, "--node-ip="+ipAddr, "--v=1")...); err != nil {
		return err
	}
	err := n.spawn("kube-proxy", n.inNode(n.Bins.KubeProxy, "--config="+n.path("kube-proxy-config.yaml"), "--v=1")...)
	return err
}

// Stop stops the node and undoes everything it changed on the machine:
// its pods (every process in its cgroups) and its own processes die, its
// cgroups and network namespace are removed (the link and the mount
// namespace, with every mount in it, go with them).
func (n Node) Stop() error {
	var errs []error
	for _, c := range []string{"kube-proxy", "kubelet"} {
		stop(n.pid(c), 10*time.Second)
	}
	if err := removeCgroup(n.Net.CgroupRoot(n.Index)); err != nil {
		errs = append(errs, err)
	}
	if holder := n.pid("namespace"); Alive(holder) {
		// containerd, its shims, and the holder itself.
		for _, pid := range mountNamespacePIDs(holder) {
			if pid != holder {
				stop(pid, 5*time.Second)
			}
		}
		stop(holder, time.Second)
	}
	if stray := cgroupPIDs(n.Net.CgroupRoot(n.Index)); len(stray) > 0 {
		errs = append(errs, fmt.Errorf("node %s: processes %v survived", n.Name, stray))
	}
	// Deleting the host's end deletes the pair at once; the kernel would
	// delete it with the namespace too, but only when its cleanup work
	// gets to it, seconds later.
	if linkExists(n.Net.HostVeth(n.Index)) {
		if err := ip("link", "delete", n.Net.HostVeth(n.Index)); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat("/run/netns/" + n.Net.Netns(n.Index)); err == nil {
		if err := ip("netns", "delete", n.Net.Netns(n.Index)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range []string{"kube-proxy", "kubelet", "containerd", "namespace"} {
		_ = os.Remove(n.pidFile(c))
	}
	return errors.Join(errs...)
}

func waitFor(timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
