// Package cluster makes the repository's local Kubernetes clusters from
// bin/ alone: a real control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler) started by kwokctl's binary
// runtime, kwok's fake nodes for scale, and real nodes on which pods run
// for real (the kubelet and kube-proxy from bin/, the machine's containerd,
// runc and CNI plugins), each in network and mount namespaces of its own.
//
// `make cluster-up`, `make run` and the tests use it, through
// hack/cmd/cluster and test/internal/cluster. Everything a real node
// changes on the machine is undone by Down: its processes and pods, its
// cgroups, its network namespace and links, the fabric bridge, and the
// kernel settings the kubelet changes (put back when the last cluster on
// the machine goes). Mounts never reach the machine: each node's live in
// its own mount namespace.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describe a local cluster.
type Options struct {
	// Name is the cluster's name (kwokctl's --name).
	Name string
	// Workdir is kwokctl's state directory; this package keeps the real
	// nodes' state beside kwokctl's, under nodes/<Name>.
	Workdir string
	// Kubeconfig is the admin kubeconfig to write.
	Kubeconfig string
	// Repo is the repository root; bin/ holds the tools.
	Repo string
	// FakeNodes are kwok nodes: pods scheduled there go Running without
	// running. RealNodes run their pods.
	FakeNodes, RealNodes int
	// KwokArgs are more `kwokctl create cluster` flags.
	KwokArgs []string
	// RegistryPort, when set, makes the real nodes pull from the registry
	// at the host's fabric address on that port (Registry), over plain
	// HTTP, and import only the cluster's own images (Pause, CoreDNS):
	// the path of a user's cluster pulling a release. The caller serves
	// the registry there.
	RegistryPort int
	// Progress gets a line per step; nil for none.
	Progress io.Writer
}

// Cluster is a local cluster.
type Cluster struct {
	Options
	// Network is the real nodes' addressing, when there are any.
	Network Network
	// Images are the real nodes' images.
	Images Images
	start  time.Time
}

// state is what Up records for Down and for the next Up.
type state struct {
	Slot      int    `json:"slot"`
	RealNodes int    `json:"realNodes"`
	Images    Images `json:"images"`
}

// New returns the cluster the options describe, with what an earlier Up
// recorded about it.
func New(o Options) *Cluster {
	c := &Cluster{Options: o}
	if s, err := c.readState(); err == nil {
		c.Network, c.Images = Network{Slot: s.Slot}, s.Images
		if c.RealNodes == 0 {
			c.RealNodes = s.RealNodes
		}
	}
	return c
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.Repo, "bin", name) }

// Dir is kwokctl's directory of the cluster.
func (c *Cluster) Dir() string { return filepath.Join(c.Workdir, "clusters", c.Name) }

// NodesDir holds the real nodes' state.
func (c *Cluster) NodesDir() string { return filepath.Join(c.Workdir, "nodes", c.Name) }

func (c *Cluster) log() string { return filepath.Join(c.Workdir, "kwokctl-"+c.Name+".log") }

func (c *Cluster) say(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "cluster: "+format+" (%s)\n", append(args, time.Since(c.start).Round(100*time.Millisecond))...)
	}
}

func (c *Cluster) readState() (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(c.NodesDir(), "state.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func (c *Cluster) writeState() error {
	b, err := json.MarshalIndent(state{Slot: c.Network.Slot, RealNodes: c.RealNodes, Images: c.Images}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.NodesDir(), "state.json"), b, 0o644)
}

// Nodes are the real nodes: node-1, node-2, ...
func (c *Cluster) Nodes() []Node {
	nodes := make([]Node, c.RealNodes)
	for i := range nodes {
		nodes[i] = Node{
			Name: fmt.Sprintf("node-%d", i+1), Index: i + 1, Net: c.Network,
			Dir:        filepath.Join(c.NodesDir(), fmt.Sprintf("node-%d", i+1)),
			PauseImage: c.Images.Pause,
			Registry:   c.Registry(),
			Bins:       Binaries{Kubelet: c.bin("kubelet"), KubeProxy: c.bin("kube-proxy")},
		}
	}
	return nodes
}

// Registry is the address (host:port) of the registry the real nodes
// pull from, on the host's end of the fabric, or empty.
func (c *Cluster) Registry() string {
	if c.RegistryPort == 0 {
		return ""
	}
	return net.JoinHostPort(c.Network.HostIP().String(), strconv.Itoa(c.RegistryPort))
}

// Up creates the cluster, or reuses it (restarting what stopped), and
// waits for every node to be Ready.
func (c *Cluster) Up(ctx context.Context) error {
	c.start = time.Now()
	if err := c.needBinaries(); err != nil {
		return err
	}
	if c.RealNodes > MaxRealNodes {
		return fmt.Errorf("%d real nodes: at most %d", c.RealNodes, MaxRealNodes)
	}
	if c.RealNodes > 0 {
		if err := NodePreflight(Binaries{Kubelet: c.bin("kubelet"), KubeProxy: c.bin("kube-proxy")}); err != nil {
			return err
		}
		if err := c.claimNetwork(); err != nil {
			return err
		}
	}
	if err := c.controlPlane(ctx); err != nil {
		return err
	}
	if c.FakeNodes > 0 {
		if err := c.kwokctl(ctx, "scale", "node", "--name", c.Name, "--replicas", strconv.Itoa(c.FakeNodes)); err != nil {
			return err
		}
	}
	if c.RealNodes > 0 {
		if err := c.realNodes(ctx); err != nil {
			return err
		}
	}
	c.say("ready with %d real and %d fake nodes; point kubectl at it with: export KUBECONFIG=%s", c.RealNodes, c.FakeNodes, c.Kubeconfig)
	return nil
}

func (c *Cluster) needBinaries() error {
	var missing []string
	for _, b := range []string{"kwokctl", "kwok", "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(c.bin(b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing in bin/: %s; run 'make tools' (it builds them from the Go module proxy)", strings.Join(missing, " "))
	}
	return nil
}

// claimNetwork takes the cluster's network slot and makes its fabric
// bridge, with the host's address on it.
func (c *Cluster) claimNetwork() error {
	if err := os.MkdirAll(c.NodesDir(), 0o755); err != nil {
		return err
	}
	dir, err := filepath.Abs(c.NodesDir())
	if err != nil {
		return err
	}
	slot, err := claimSlot(dir)
	if err != nil {
		return err
	}
	c.Network = Network{Slot: slot}
	if err := c.writeState(); err != nil {
		return err
	}
	if linkExists(c.Network.Bridge()) {
		return nil
	}
	for _, s := range [][]string{
		{"link", "add", c.Network.Bridge(), "type", "bridge"},
		{"addr", "add", c.Network.HostIP().String() + "/24", "dev", c.Network.Bridge()},
		{"link", "set", c.Network.Bridge(), "up"},
	} {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// kwokctl runs kwokctl, its output to its log; on failure the error holds
// the log's last lines.
func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	if err := os.MkdirAll(c.Workdir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(c.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.CommandContext(ctx, c.bin("kwokctl"), args...)
	// kwokctl shells out to `kubectl` from PATH (and would download one
	// without it): make it use bin/kubectl.
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.Workdir, "PATH="+filepath.Join(c.Repo, "bin")+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", args[0]+" "+args[1], err, c.logTail())
	}
	return nil
}

// createWatched runs `kwokctl create cluster` and, while kwokctl waits for
// the control plane, fails at once when etcd or kube-apiserver has exited,
// with that component's last log lines: kwokctl would wait out its whole
// --wait for a component that is gone (an apiserver whose port was taken
// exits at start). Then it stops what did start. It says every 15 seconds
// that it is still waiting. The controller manager and the scheduler are
// not watched: on a loaded machine they exit when the apiserver is slow to
// turn healthy (CI saw kube-controller-manager give up after 25 s), and
// restartExited starts them again once kwokctl is done.
func (c *Cluster) createWatched(ctx context.Context, args []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var kwokctlErr error
	done := make(chan struct{})
	go func() { kwokctlErr = c.kwokctl(ctx, args...); close(done) }()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	started := time.Now()
	lastSaid := started
	for {
		select {
		case <-done:
			return kwokctlErr
		case <-poll.C:
			if exited := c.exitedOf("etcd", "kube-apiserver"); len(exited) > 0 {
				cancel()
				<-done // kwokctl killed: its error says only that
				_ = c.kwokctl(context.Background(), "stop", "cluster", "--name", c.Name)
				return c.exitError(exited[0], "exited while the cluster started")
			}
			if time.Since(lastSaid) >= 15*time.Second {
				lastSaid = time.Now()
				c.say("waiting for the control plane to answer (%s so far)", time.Since(started).Round(time.Second))
			}
		}
	}
}

// restartExited starts again a controller manager or scheduler that
// exited while the cluster started: each waits about 20 s for the
// apiserver's /healthz and gives up, and on a loaded machine the apiserver
// can take longer (CI saw its rbac/bootstrap-roles hook still running),
// after which kwokctl leaves the cluster without them and no Deployment
// ever rolls out. So it waits for /healthz first, then `kwokctl start
// cluster` (which starts only what is not running), then watches them
// through their own wait; up to restartAttempts times, after which it
// fails with their log lines.
func (c *Cluster) restartExited(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		exited := c.exitedOf("kube-controller-manager", "kube-scheduler")
		if len(exited) == 0 {
			return nil
		}
		if attempt > restartAttempts {
			return c.exitError(exited[0], fmt.Sprintf("exited again after %d restarts", restartAttempts))
		}
		for _, name := range exited {
			logPath := filepath.Join(c.Dir(), "logs", name+".log")
			c.say("%s exited while the cluster started (%s); starting it again once the apiserver is healthy (attempt %d of %d)",
				name, strings.TrimSpace(lastLines(logPath, 1)), attempt, restartAttempts)
		}
		if err := c.waitHealthy(ctx, 5*time.Minute); err != nil {
			return err
		}
		if err := c.kwokctl(ctx, "start", "cluster", "--name", c.Name, "--wait", "180s"); err != nil {
			return err
		}
		if err := c.waitHealthy(ctx, 5*time.Minute); err != nil {
			return err
		}
		if err := c.watchStarted(ctx, exited); err != nil {
			return err
		}
	}
}

// watchStarted outlasts the components' own wait for the apiserver, so
// one that gives up again is seen here and not by a test much later; it
// returns early when one has exited.
func (c *Cluster) watchStarted(ctx context.Context, names []string) error {
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	deadline := time.After(componentHealthWait)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return nil
		case <-poll.C:
			if len(c.exitedOf(names...)) > 0 {
				return nil
			}
		}
	}
}

const (
	restartAttempts = 3
	// componentHealthWait outlasts the controller manager's and the
	// scheduler's wait for a healthy apiserver when they start (20 s).
	componentHealthWait = 25 * time.Second
)

// waitHealthy waits for the apiserver's /healthz to answer ok, saying
// every 15 s which checks still fail.
func (c *Cluster) waitHealthy(ctx context.Context, timeout time.Duration) error {
	started := time.Now()
	lastSaid := started
	for {
		out, err := exec.CommandContext(ctx, c.bin("kubectl"), "--kubeconfig", c.Kubeconfig, "--request-timeout=5s",
			"get", "--raw", "/healthz").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "ok" {
			return nil
		}
		failing := failingHealthChecks(string(out))
		if time.Since(started) > timeout {
			return fmt.Errorf("the apiserver was not healthy within %s (failing: %s)\n%s", timeout, failing, c.logTail())
		}
		if time.Since(lastSaid) >= 15*time.Second {
			lastSaid = time.Now()
			c.say("waiting for the apiserver to turn healthy (failing: %s; %s so far)", failing, time.Since(started).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// healthCheckFailed matches a failing check in a /healthz answer, as
// kubectl prints it (the body quoted, newlines escaped): "[-]NAME failed".
var healthCheckFailed = regexp.MustCompile(`\[-\]([^ \\]+) failed`)

// failingHealthChecks names the failing checks in kubectl's /healthz
// output, or says the apiserver did not answer.
func failingHealthChecks(out string) string {
	var names []string
	for _, m := range healthCheckFailed.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return "no answer: " + lines[len(lines)-1]
	}
	return strings.Join(names, ", ")
}

// exitError is the failure of a component that exited: what happened,
// its last log lines and the fix.
func (c *Cluster) exitError(name, what string) error {
	logPath := filepath.Join(c.Dir(), "logs", name+".log")
	return fmt.Errorf("%s %s; its last lines (%s):\n%s\nfix the cause, then run 'make cluster-down' and try again",
		name, what, logPath, lastLines(logPath, 8))
}

// exitedOf is the components among names whose pid file (kwokctl's
// pids/NAME.pid) names a process that has exited: gone, or a zombie that
// kwokctl, its parent, has not reaped yet.
func (c *Cluster) exitedOf(names ...string) []string {
	var out []string
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(c.Dir(), "pids", name+".pid"))
		if err != nil {
			continue // not started
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && !processRunning(pid) {
			out = append(out, name)
		}
	}
	return out
}

// processRunning reads the process's state from /proc/PID/stat: the field
// after the command name's closing parenthesis; Z and X have exited.
func processRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// lastLines is the last n lines of a file, indented.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

var kwokLogLine = regexp.MustCompile(`"level":"([A-Z]+)".*"msg":"([^"]*)"(?:.*"err":"([^"]*)")?`)

// logTail is the last lines of kwokctl's log, level, message and error.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.log())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	for i, l := range lines {
		if m := kwokLogLine.FindStringSubmatch(l); m != nil {
			lines[i] = "  " + strings.TrimSpace(m[1]+" "+m[2]+" "+m[3])
		}
	}
	return fmt.Sprintf("last lines of %s:\n%s\ncomponent logs: %s/logs/", c.log(), strings.Join(lines, "\n"), c.Dir())
}

// Reachable says whether the apiserver answers.
func (c *Cluster) Reachable() bool {
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		return false
	}
	return exec.Command(c.bin("kubectl"), "--kubeconfig", c.Kubeconfig, "--request-timeout=3s", "get", "--raw", "/readyz").Run() == nil
}

// LockCreation takes the machine-wide lock that serializes cluster
// creation: kwokctl picks each port by scanning down from 32767 for one
// free now and binds it later, so two clusters created at once (parallel
// tests) can pick the same one. A created cluster holds its ports. Whoever
// restarts a component on a port of its own (test/chaos) takes it too.
func LockCreation() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "memcached-operator-kwok-create.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

func (c *Cluster) controlPlane(ctx context.Context) error {
	if _, err := os.Stat(c.Dir()); err == nil {
		if c.Reachable() {
			c.say("reusing cluster %q", c.Name)
			return nil
		}
		c.say("cluster %q exists but does not answer; restarting its components", c.Name)
		// Stop first: after a crash some components may still run without
		// the others (an apiserver without its etcd), and start skips those.
		_ = c.kwokctl(ctx, "stop", "cluster", "--name", c.Name)
		if err := c.kwokctl(ctx, "start", "cluster", "--name", c.Name, "--wait", "180s"); err != nil {
			return fmt.Errorf("the cluster directory %s looks stale (left by a crash or another machine): run 'make cluster-down' and try again\n%w", c.Dir(), err)
		}
		if !c.Reachable() {
			return fmt.Errorf("cluster %q started but its apiserver does not answer; run 'make cluster-down' and try again (logs: %s/logs/)", c.Name, c.Dir())
		}
		c.say("started cluster %q", c.Name)
		return nil
	}
	c.say("creating cluster %q: kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok from bin/", c.Name)
	unlock, err := LockCreation()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(filepath.Dir(c.Kubeconfig), 0o755); err != nil {
		return err
	}
	args := []string{"create", "cluster", "--name", c.Name, "--runtime", "binary", "--kubeconfig", c.Kubeconfig,
		"--kube-apiserver-binary", c.bin("kube-apiserver"), "--etcd-binary", c.bin("etcd"),
		"--kube-controller-manager-binary", c.bin("kube-controller-manager"),
		"--kube-scheduler-binary", c.bin("kube-scheduler"), "--kwok-controller-binary", c.bin("kwok"),
		"--wait", "180s"}
	if c.RealNodes > 0 {
		realArgs, err := c.realNodeControlPlaneArgs()
		if err != nil {
			return err
		}
		args = append(args, realArgs...)
	}
	if c.RealNodes > 0 && c.FakeNodes == 0 {
		// No fake node to play: nothing for kwok's controller to do, and
		// nothing it could do wrong to the real nodes' pods.
		args = append(args, "--disable", "kwok-controller")
	}
	if err := c.createWatched(ctx, append(args, c.KwokArgs...)); err != nil {
		return err
	}
	// kwokctl exits 0 even when its wait for readiness timed out.
	if !c.Reachable() {
		return fmt.Errorf("kwokctl create cluster: the apiserver does not answer\n%s", c.logTail())
	}
	if err := c.restartExited(ctx); err != nil {
		return err
	}
	c.say("created cluster %q", c.Name)
	return nil
}

// realNodeControlPlaneArgs make the control plane serve real nodes: the
// apiserver's certificate names the fabric address the nodes reach it on
// and the kubernetes Service's address pods reach it on,
// it advertises that address (the kubernetes Service's endpoint, for
// pods), Services get 10.96.0.0/16, and it calls kubelets at their
// InternalIP with a client certificate (kwokctl's admin one, which the kubelets' webhook
// authorization allows) instead of anonymously.
func (c *Cluster) realNodeControlPlaneArgs() ([]string, error) {
	config := filepath.Join(c.NodesDir(), "kwokctl.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `# Generated by hack/cluster; DO NOT EDIT.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  kubeApiserverCertSANs: [%q, %q]
`, c.Network.HostIP(), KubernetesServiceIP), 0o644); err != nil {
		return nil, err
	}
	pki := filepath.Join(c.Dir(), "pki")
	return []string{"--config", config,
		"--extra-args", "kube-apiserver=advertise-address=" + c.Network.HostIP().String(),
		"--extra-args", "kube-apiserver=service-cluster-ip-range=" + ServiceCIDR,
		// Node names are not in any DNS the apiserver uses.
		"--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname",
		"--extra-args", "kube-apiserver=kubelet-client-certificate=" + filepath.Join(pki, "admin.crt"),
		"--extra-args", "kube-apiserver=kubelet-client-key=" + filepath.Join(pki, "admin.key"),
		"--extra-args", "kube-controller-manager=service-cluster-ip-range=" + ServiceCIDR,
	}, nil
}

// apiServerPort reads the apiserver's port from the admin kubeconfig.
func (c *Cluster) apiServerPort() (string, error) {
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`server: https://[^:\s]+:(\d+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s names no https server", c.Kubeconfig)
	}
	return string(m[1]), nil
}

// forgetDiscovery removes kubectl's cached discovery of the cluster's
// apiserver. kubectl keeps it for hours under the server's host and port,
// and the next local cluster often gets the same port: without this, kubectl
// would answer from this cluster's API list for the next one ("the server
// doesn't have a resource type ..." for a CRD the next one has).
func (c *Cluster) forgetDiscovery() {
	port, err := c.apiServerPort()
	if err != nil {
		return
	}
	cache := os.Getenv("KUBECACHEDIR")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return
		}
		cache = filepath.Join(home, ".kube", "cache")
	}
	_ = os.RemoveAll(filepath.Join(cache, "discovery", "127.0.0.1_"+port))
}

// Kubectl runs bin/kubectl against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

func (c *Cluster) apply(ctx context.Context, objects []any) error {
	y, err := YAMLStream(objects)
	if err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, y, "apply", "--server-side", "--field-manager=local-cluster", "-f", "-")
	return err
}

// realNodes starts the real nodes that are not running, or reuses them.
func (c *Cluster) realNodes(ctx context.Context) error {
	nodes := c.Nodes()
	allRunning := true
	for _, n := range nodes {
		allRunning = allRunning && n.Running()
	}
	if allRunning && c.Images.Pause != "" {
		c.say("reusing %d real nodes", len(nodes))
		return c.waitReady(ctx, nodes)
	}
	for _, n := range nodes {
		if err := n.Stop(); err != nil {
			return err
		}
	}
	archive := filepath.Join(c.NodesDir(), "images.tar")
	images, err := BuildNodeImages(ctx, c.Repo, archive, c.RegistryPort != 0, c.Progress)
	if err != nil {
		return err
	}
	c.Images = images
	if err := c.writeState(); err != nil {
		return err
	}
	nodes = c.Nodes()
	ca, err := LoadCA(filepath.Join(c.Dir(), "pki"))
	if err != nil {
		return err
	}
	port, err := c.apiServerPort()
	if err != nil {
		return err
	}
	if err := c.apply(ctx, NodeObjects(nodes)); err != nil {
		return err
	}
	for _, n := range nodes {
		n.APIServer = fmt.Sprintf("https://%s:%s", c.Network.HostIP(), port)
		if err := c.startNode(ctx, n, ca, archive); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, n := range nodes {
		for _, other := range nodes {
			if other.Index != n.Index {
				if err := n.routeTo(other); err != nil {
					return err
				}
			}
		}
	}
	if err := c.waitReady(ctx, nodes); err != nil {
		return err
	}
	if err := c.apply(ctx, CoreDNSObjects(c.Images.CoreDNS)); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "wait", "--for=condition=Ready", "pod", "--selector=k8s-app=kube-dns", "--timeout=120s"); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	c.say("cluster DNS ready: CoreDNS at %s (kube-dns)", DNSServiceIP)
	return nil
}

func (c *Cluster) startNode(ctx context.Context, n Node, ca *CA, archive string) error {
	if err := os.RemoveAll(n.Dir); err != nil {
		return err
	}
	if err := n.writeFiles(ca); err != nil {
		return err
	}
	if err := n.createNetwork(); err != nil {
		return err
	}
	if err := n.startNamespace(); err != nil {
		return err
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	if err := n.ImportImages(ctx, archive); err != nil {
		return err
	}
	if err := n.startKubelet(); err != nil {
		return err
	}
	c.say("started node %s (%s, pods %s): containerd, kubelet, kube-proxy", n.Name, n.Net.NodeIP(n.Index), n.Net.PodCIDR(n.Index))
	return nil
}

func (c *Cluster) waitReady(ctx context.Context, nodes []Node) error {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = "node/" + n.Name
	}
	if _, err := c.Kubectl(ctx, nil, append([]string{"wait", "--for=condition=Ready", "--timeout=120s"}, names...)...); err != nil {
		var logs []string
		for _, n := range nodes {
			logs = append(logs, n.path("logs"))
		}
		return fmt.Errorf("%w\nnode logs: %s", err, strings.Join(logs, " "))
	}
	c.say("%d real nodes Ready", len(nodes))
	return nil
}

// PIDs are the cluster's own processes: the control plane's (from
// kwokctl's pid files) and the real nodes'.
func (c *Cluster) PIDs() []int {
	var out []int
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "pids", "*.pid"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				out = append(out, pid)
			}
		}
	}
	for _, n := range c.Nodes() {
		out = append(out, n.PIDs()...)
	}
	return out
}

// EtcdURL is the address etcd serves its clients and its /metrics on,
// read from its command line: kwokctl picks the port and records it only
// there and in its own state.
func (c *Cluster) EtcdURL() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir(), "pids", "etcd.pid"))
	if err != nil {
		return "", fmt.Errorf("etcd of cluster %s: %w", c.Name, err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(b)), "cmdline"))
	if err != nil {
		return "", fmt.Errorf("etcd of cluster %s: %w", c.Name, err)
	}
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		if url, ok := strings.CutPrefix(arg, "--advertise-client-urls="); ok {
			return strings.Split(url, ",")[0], nil
		}
	}
	return "", fmt.Errorf("etcd of cluster %s: no --advertise-client-urls in its command line", c.Name)
}

// Down deletes the cluster and undoes what its real nodes changed.
func (c *Cluster) Down(ctx context.Context) error {
	c.start = time.Now()
	var errs []error
	if _, err := os.Stat(c.NodesDir()); err == nil {
		for _, n := range c.Nodes() {
			if err := n.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if linkExists(c.Network.Bridge()) {
			// Its routes to the nodes' pods go with it.
			if err := ip("link", "delete", c.Network.Bridge()); err != nil {
				errs = append(errs, err)
			}
		}
		dir, _ := filepath.Abs(c.NodesDir())
		if err := os.RemoveAll(c.NodesDir()); err != nil {
			errs = append(errs, err)
		}
		if err := releaseSlot(dir); err != nil {
			errs = append(errs, err)
		}
		c.say("stopped %d real nodes and removed their namespaces, cgroups and links", c.RealNodes)
	}
	if _, err := os.Stat(c.Dir()); err == nil {
		c.forgetDiscovery()
		if err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name); err != nil {
			errs = append(errs, err)
		} else {
			c.say("deleted cluster %q", c.Name)
		}
	} else {
		c.say("no cluster %q", c.Name)
	}
	for _, f := range []string{c.Kubeconfig, c.log()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
