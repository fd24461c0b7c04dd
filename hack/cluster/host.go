package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The machine-wide record of the clusters with real nodes: which network
// slot each holds, and the kernel settings as they were before the first
// kubelet changed them. Clusters come and go side by side (parallel tests),
// so the settings are put back when the last one goes, not by each.
const (
	hostRegistry     = "/run/memcached-operator-local-clusters.json"
	hostRegistryLock = "/run/memcached-operator-local-clusters.lock"
)

// KernelSysctls are the machine-wide settings the kubelet changes when it
// starts (its setupKernelTunables), as paths under /proc/sys. Per-network
// namespace ones (net.*) change only inside the nodes' namespaces.
var KernelSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

type registry struct {
	// Clusters maps a cluster's state directory to its network slot.
	Clusters map[string]int `json:"clusters"`
	// Sysctls are KernelSysctls before the first cluster started.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// NetnsDir is what netnsDir was before the first cluster started.
	NetnsDir netnsDirState `json:"netnsDir,omitempty"`
}

// netnsDir holds the named network namespaces. iproute2's first `ip netns
// add` creates it and mounts it onto itself (so that namespaces mounted
// under it propagate), and nothing in iproute2 ever undoes that.
const netnsDir = "/run/netns"

// netnsDirState is how netnsDir was found: absent, a plain directory, or
// a mount point.
type netnsDirState string

const (
	netnsDirAbsent  netnsDirState = "absent"
	netnsDirPlain   netnsDirState = "directory"
	netnsDirMounted netnsDirState = "mount"
)

// withRegistry runs f on the registry under a machine-wide lock and saves
// what it leaves; clusters whose state directory is gone (a crash, a
// deleted .work) are forgotten first.
func withRegistry(f func(*registry) error) error {
	lock, err := os.OpenFile(hostRegistryLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	reg := &registry{Clusters: map[string]int{}}
	if b, err := os.ReadFile(hostRegistry); err == nil {
		if err := json.Unmarshal(b, reg); err != nil {
			return fmt.Errorf("%s: %w (delete it if no local cluster runs)", hostRegistry, err)
		}
		if reg.Clusters == nil {
			reg.Clusters = map[string]int{}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for dir := range reg.Clusters {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			delete(reg.Clusters, dir)
		}
	}
	if err := f(reg); err != nil {
		return err
	}
	if len(reg.Clusters) == 0 {
		if err := os.Remove(hostRegistry); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return os.Remove(hostRegistryLock)
	}
	b, err := json.MarshalIndent(reg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(hostRegistry, b, 0o600)
}

// claimSlot gives the cluster at dir a network slot (its own if it has
// one) and saves the kernel settings if it is the first.
func claimSlot(dir string) (int, error) {
	slot := -1
	err := withRegistry(func(reg *registry) error {
		if s, ok := reg.Clusters[dir]; ok {
			slot = s
			return nil
		}
		if len(reg.Clusters) == 0 {
			saved, err := readSysctls()
			if err != nil {
				return err
			}
			reg.Sysctls = saved
			if reg.NetnsDir, err = readNetnsDir(); err != nil {
				return err
			}
		}
		used := map[int]bool{}
		for _, s := range reg.Clusters {
			used[s] = true
		}
		for s := 0; s < MaxSlots; s++ {
			if used[s] || linkExists(Network{Slot: s}.Bridge()) {
				continue
			}
			slot = s
			reg.Clusters[dir] = s
			return nil
		}
		return fmt.Errorf("all %d network slots for local clusters with real nodes are taken: delete one (make cluster-down)", MaxSlots)
	})
	return slot, err
}

// releaseSlot forgets the cluster at dir and, if it was the last, puts
// the kernel settings and netnsDir back.
func releaseSlot(dir string) error {
	return withRegistry(func(reg *registry) error {
		delete(reg.Clusters, dir)
		if len(reg.Clusters) > 0 || reg.Sysctls == nil {
			return nil
		}
		return errors.Join(writeSysctls(reg.Sysctls), restoreNetnsDir(reg.NetnsDir))
	})
}

func readNetnsDir() (netnsDirState, error) {
	if _, err := os.Stat(netnsDir); errors.Is(err, fs.ErrNotExist) {
		return netnsDirAbsent, nil
	} else if err != nil {
		return "", err
	}
	mounted, err := isMountPoint(netnsDir)
	if err != nil || !mounted {
		return netnsDirPlain, err
	}
	return netnsDirMounted, nil
}

// restoreNetnsDir undoes what iproute2 did to netnsDir since was: the
// mount onto itself, then the directory. Both only while it holds no
// namespace: one that is still there is someone else's, and stays usable.
func restoreNetnsDir(was netnsDirState) error {
	if was == "" || was == netnsDirMounted {
		return nil
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) > 0) {
		return nil
	} else if err != nil {
		return err
	}
	// Two first `ip netns add`s at once can each mount it: unmount until
	// it is a plain directory again.
	for {
		mounted, err := isMountPoint(netnsDir)
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		if err := syscall.Unmount(netnsDir, 0); err != nil {
			return fmt.Errorf("unmount %s (iproute2 mounted it for the nodes' namespaces): %w", netnsDir, err)
		}
	}
	if was == netnsDirAbsent {
		return os.Remove(netnsDir)
	}
	return nil
}

func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range KernelSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

func writeSysctls(values map[string]string) error {
	var errs []error
	for k, v := range values {
		cur, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s to %s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ip runs iproute2.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cgroupHierarchies are the mount points of this machine's cgroup
// hierarchies: every v1 controller (and named) hierarchy, and the v2 one.
func cgroupHierarchies() ([]string, error) {
	var out []string
	err := eachMount(func(point, fsType string) {
		if fsType == "cgroup" || fsType == "cgroup2" {
			out = append(out, point)
		}
	})
	sort.Strings(out)
	return out, err
}

// isMountPoint says whether path is a mount point of this mount namespace.
func isMountPoint(path string) (bool, error) {
	found := false
	err := eachMount(func(point, _ string) { found = found || point == path })
	return found, err
}

// eachMount calls f with the mount point and filesystem type of every
// mount of this process's mount namespace.
func eachMount(f func(point, fsType string)) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, field := range fields {
			if field == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		f(fields[4], fields[sep+1])
	}
	return sc.Err()
}

// createCgroup makes path in every hierarchy; cpuset's needs its CPUs and
// memory nodes set before a process may join it, so it copies its parent's.
func createCgroup(path string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// cgroupPIDs are the processes anywhere under path, in any hierarchy.
func cgroupPIDs(path string) []int {
	hs, _ := cgroupHierarchies()
	seen := map[int]bool{}
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d fs.DirEntry, walkErr error) error {
			if walkErr != nil || !d.IsDir() {
				return nil //nolint:nilerr // a cgroup gone mid-walk holds no process
			}
			b, readErr := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if readErr != nil {
				return nil //nolint:nilerr // likewise
			}
			for _, l := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(l); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// removeCgroup kills every process under path and removes its cgroups,
// deepest first, in every hierarchy.
func removeCgroup(path string) error {
	deadline := time.Now().Add(20 * time.Second)
	for pids := cgroupPIDs(path); len(pids) > 0; pids = cgroupPIDs(path) {
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v do not die", path, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, path)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			// A cgroup whose last process just died can be busy for a moment.
			for try := 0; ; try++ {
				err := syscall.Rmdir(dirs[i])
				if err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				if try == 100 {
					errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// mountNamespacePIDs are the processes in the mount namespace of pid
// (containerd and its shims, which live in the node's).
func mountNamespacePIDs(pid int) []int {
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", p)); err == nil && ns == target {
			out = append(out, p)
		}
	}
	return out
}

// Alive says whether pid runs: it exists and is not a zombie its parent has
// not reaped yet.
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie is dead for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for pid to die.
func stop(pid int, grace time.Duration) {
	if !Alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for Alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
