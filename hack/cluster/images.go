package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/example/memcached-operator/hack/image"
)

// Images are the references of the images the real nodes hold, imported
// (the public registries are out of reach; a cluster with a registry
// imports only Pause and CoreDNS and pulls the rest). Each tag says what
// the image is: memcached's is Debian's memcached version.
type Images struct {
	Pause, Memcached, Exporter, CoreDNS, Client string
	// Manager is the operator's image from make docker-build
	// (dist/images/manager), when it was built.
	Manager string
}

// NodeImages works out the references from the binaries they hold.
func NodeImages(repo string) (Images, error) {
	memcached, err := versionOf(`memcached ([0-9][^ \n]*)`, "memcached", "-V")
	if err != nil {
		return Images{}, err
	}
	exporter, err := versionOf(`version ([0-9][^ \n]*)`, filepath.Join(repo, "bin", "memcached_exporter"), "--version")
	if err != nil {
		return Images{}, err
	}
	coredns, err := versionOf(`CoreDNS-([0-9][^ \n]*)`, filepath.Join(repo, "bin", "coredns"), "-version")
	if err != nil {
		return Images{}, err
	}
	return Images{
		Pause:     "localhost/pause:local",
		Memcached: "localhost/memcached:" + memcached + "-debian",
		Exporter:  "localhost/memcached-exporter:v" + exporter,
		CoreDNS:   "localhost/coredns:v" + coredns,
		Client:    "localhost/memcached-cli:local",
	}, nil
}

func versionOf(pattern string, cmd ...string) (string, error) {
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w (make tools test-deps)", cmd[0], err)
	}
	m := regexp.MustCompile(pattern).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s printed no version: %s", cmd[0], out)
	}
	return string(m[1]), nil
}

// BuildNodeImages builds the node images with the repository's image
// builder, for this machine's platform, and writes them with the manager's
// image (if dist/images/manager exists) into one archive for ctr import.
// Nodes that pull from a registry (pulling) import only the cluster's own
// images, the sandbox's and CoreDNS's: everything a user runs is pulled.
func BuildNodeImages(ctx context.Context, repo, archive string, pulling bool, progress io.Writer) (Images, error) {
	start := time.Now()
	refs, err := NodeImages(repo)
	if err != nil {
		return refs, err
	}
	components := map[string]string{"pause": refs.Pause, "coredns": refs.CoreDNS}
	if pulling {
		refs = Images{Pause: refs.Pause, CoreDNS: refs.CoreDNS}
	} else {
		components["memcached"], components["memcached-exporter"], components["memcached-cli"] = refs.Memcached, refs.Exporter, refs.Client
	}
	images := map[name.Reference]v1.Image{}
	for component, ref := range components {
		img, err := BuildLocalImage(ctx, repo, component)
		if err != nil {
			return refs, err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return refs, err
		}
		images[tag] = img
	}
	if manager, err := image.ReadLayout(filepath.Join(repo, "dist", "images", "manager")); err == nil && !pulling {
		m, err := manager.Index.IndexManifest()
		if err != nil {
			return refs, err
		}
		version := m.Annotations["org.opencontainers.image.version"]
		img, err := platformImage(manager.Index, machinePlatform)
		if err != nil {
			return refs, err
		}
		refs.Manager = "localhost/memcached-operator:" + version
		tag, err := name.NewTag(refs.Manager)
		if err != nil {
			return refs, fmt.Errorf("manager image version %q: %w", version, err)
		}
		images[tag] = img
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return refs, err
	}
	if err := tarball.MultiRefWriteToFile(archive, images); err != nil {
		return refs, err
	}
	if progress != nil {
		var built []string
		for _, ref := range []string{refs.Pause, refs.Memcached, refs.Exporter, refs.CoreDNS, refs.Client, refs.Manager} {
			if ref != "" {
				built = append(built, ref)
			}
		}
		fmt.Fprintf(progress, "cluster: built the node images (%s) in %v\n", strings.Join(built, ", "), time.Since(start).Round(time.Millisecond))
	}
	return refs, nil
}

// machinePlatform is the platform the node images are built for.
var machinePlatform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// BuildLocalImage builds one of the repository's local images
// (image.LocalComponents: pause, memcached, memcached-exporter, coredns,
// memcached-cli) for this machine's platform.
func BuildLocalImage(ctx context.Context, repo, component string) (v1.Image, error) {
	c, ok := image.LocalComponents[component]
	if !ok {
		return nil, fmt.Errorf("no local image %q", component)
	}
	md := image.Metadata{Version: "local", Revision: "local", Source: "local", Created: time.Unix(0, 0).UTC()}
	built, err := image.Build(ctx, repo, c, md, []v1.Platform{machinePlatform}, nil)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", component, err)
	}
	return platformImage(built.Index, machinePlatform)
}

func platformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s in the index", p)
}
