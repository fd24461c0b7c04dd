package image

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LocalComponents are the images of the local cluster's real nodes, built
// for this machine only and imported into each node's containerd, never
// pushed: there is no registry to pull the public ones from here.
var LocalComponents = map[string]Component{
	// The pod sandbox: a static program that sleeps and reaps.
	"pause": {
		Name: "pause", Module: "hack", Package: "./cmd/pause", Path: "/pause",
		Title: "pause", Description: "Pod sandbox of the local cluster's nodes",
	},
	// memcached from Debian's package, as the official image runs it: as
	// memcache (11211), with memcached as the entrypoint.
	"memcached": {
		Name: "memcached", Binary: "/usr/bin/memcached", Path: "/usr/bin/memcached", UID: 11211, UserName: "memcache",
		Title: "memcached", Description: "Debian's memcached and its shared libraries, for the local cluster",
	},
	"memcached-exporter": {
		Name: "memcached_exporter", Binary: "bin/memcached_exporter", Path: "/bin/memcached_exporter",
		Title: "memcached_exporter", Description: "Prometheus memcached_exporter from bin/, for the local cluster",
	},
	"coredns": {
		Name: "coredns", Binary: "bin/coredns", Path: "/coredns",
		Title: "coredns", Description: "CoreDNS from bin/ (tools/coredns), the local cluster's DNS",
	},
	// A memcached client for pods: make memcached-cli, and the real-node
	// tests' client pods.
	"memcached-cli": {
		Name: "memcached-cli", Module: "hack", Package: "./cmd/memcached-cli", Path: "/memcached-cli",
		Title: "memcached-cli", Description: "A small memcached client (set, get, stats) for the local cluster's pods",
	},
}

// sharedLibraries are the shared libraries a dynamically linked program
// loads, as ldd resolves them on this machine, at the paths the program
// asks for; none for a static one.
func sharedLibraries(bin string) ([]file, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w\n%s", bin, err, out)
	}
	var files []file
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libevent-2.1.so.7 => /lib/x86_64-linux-gnu/libevent-2.1.so.7 (0x...)"
		// or "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
		fields := strings.Fields(sc.Text())
		var path string
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			path = fields[2]
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			path = fields[0]
		default:
			continue
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: path, mode: 0o755, data: data})
	}
	return files, sc.Err()
}
