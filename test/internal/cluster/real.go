package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/test/internal/proc"
)

// NodeImage is one of the images the cluster's real nodes hold (their
// archive, from hack/cluster), for a test to derive another from.
func (l *Local) NodeImage(t testing.TB, ref string) v1.Image {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(l.Cluster.NodesDir(), "images.tar"), &tag)
	if err != nil {
		t.Fatalf("image %s of the real nodes: %v", ref, err)
	}
	return img
}

// WithUser is img running as user (the image config's User).
func WithUser(t testing.TB, img v1.Image, user string) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.User = user
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ImportImages puts images into every real node's containerd under their
// references, as hack/cluster does with its own.
func (l *Local) ImportImages(t testing.TB, images map[string]v1.Image) {
	t.Helper()
	refs := map[name.Reference]v1.Image{}
	for ref, img := range images {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		refs[tag] = img
	}
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Cluster.Nodes() {
		if err := n.ImportImages(context.Background(), archive); err != nil {
			t.Fatal(err)
		}
	}
}

// Processes are the processes named comm that run in the cluster's real
// nodes' pods (found by their cgroup), by node.
func (l *Local) Processes(comm string) map[string][]int {
	out := map[string][]int{}
	for _, pid := range proc.PIDs() {
		if proc.Comm(pid) != comm || !buildcluster.Alive(pid) {
			continue
		}
		cg := proc.Cgroups(pid)
		for _, n := range l.Cluster.Nodes() {
			if strings.Contains(cg, n.Net.CgroupRoot(n.Index)+"/") {
				out[n.Name] = append(out[n.Name], pid)
			}
		}
	}
	return out
}

// MachineState is what real nodes could change on the machine, by kind:
// kernel settings, firewall rules (iptables, legacy and nf_tables), mounts,
// cgroups, links, addresses, routes and network namespaces. Two states
// taken before and after a cluster must be equal.
func MachineState(t testing.TB) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, k := range buildcluster.KernelSysctls {
		v, err := proc.Sysctl(k)
		if err != nil {
			t.Fatal(err)
		}
		state["sysctl "+k] = v
	}
	for _, k := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet", "net/bridge/bridge-nf-call-iptables"} {
		if v, err := proc.Sysctl(k); err == nil {
			state["sysctl "+k] = v
		}
	}
	for name, cmd := range map[string][]string{
		"iptables":  {"iptables-save"},
		"ip6tables": {"ip6tables-save"},
		"nftables":  {"nft", "list", "ruleset"},
		"links":     {"ip", "-o", "link", "show"},
		"addresses": {"ip", "-o", "addr", "show"},
		"routes":    {"ip", "route", "show", "table", "all"},
		"netns":     {"ip", "netns", "list"},
	} {
		out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		if err != nil && name != "nftables" {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
		state[name] = stripCounters(string(out))
	}
	points, err := proc.MountPoints()
	if err != nil {
		t.Fatal(err)
	}
	state["mounts"] = strings.Join(points, "\n")
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	var cgroups []string
	for _, h := range hs {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() {
				cgroups = append(cgroups, filepath.Join(h, e.Name()))
			}
		}
	}
	state["cgroups"] = strings.Join(cgroups, "\n")
	return state
}

// stripCounters drops what changes by itself: iptables-save's packet
// counters and comments with dates, and link statistics.
func stripCounters(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.Index(l, " ["); strings.HasPrefix(l, ":") && i > 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
