package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// What the tests read from /proc, read here only: a process's CPU time,
// memory, command line, environment, working directory, name and cgroups,
// the list of processes, kernel settings and the machine's description.

// CPUSeconds is user+system CPU time of a process so far.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name (which may hold spaces);
	// utime and stime are the 14th and 15th fields of the whole line.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// RSSMiB is the resident memory of a process (VmRSS).
func RSSMiB(pid int) (float64, error) { return statusMiB(pid, "VmRSS") }

// PeakRSSMiB is the high-water mark of a process's resident set (VmHWM).
func PeakRSSMiB(pid int) (float64, error) { return statusMiB(pid, "VmHWM") }

func statusMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// CommandLine is how a process was started: its arguments, working
// directory and environment, enough to start it again the same way.
type CommandLine struct {
	Args, Env []string
	Dir       string
}

// Command reads the command line of a running process.
func Command(pid int) (CommandLine, error) {
	var c CommandLine
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return c, err
	}
	c.Args = nulSeparated(cmdline)
	if c.Dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return c, err
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return c, err
	}
	c.Env = nulSeparated(environ)
	return c, nil
}

func nulSeparated(b []byte) []string {
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// PIDs lists the processes running now.
func PIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Comm is a process's name; "" when it has gone.
func Comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Cgroups is a process's /proc/PID/cgroup; "" when it has gone.
func Cgroups(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	return string(b)
}

// Sysctl reads a kernel setting by its path under /proc/sys
// (net/ipv4/ip_forward).
func Sysctl(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// MountPoints lists the mount points this process sees.
func MountPoints() ([]string, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var points []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			points = append(points, f[4])
		}
	}
	return points, nil
}

// Machine describes the machine a report was measured on: CPU model and
// count, memory, and kernel.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s × %d cores%s%s", model, runtime.NumCPU(), mem, kernel)
}
