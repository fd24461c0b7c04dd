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
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/example/memcached-operator/hack/image"
)

// Images are the references of the images the real nodes hold, imported
// (never pulled: there is no registry to pull the public ones from). Each
// tag says what the image is: memcached's is Debian's memcached version.
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
func BuildNodeImages(ctx context.Context, repo, archive string, progress io.Writer) (Images, error) {
	start := time.Now()
	refs, err := NodeImages(repo)
	if err != nil {
		return refs, err
	}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	md := image.Metadata{Version: "local", Revision: "local", Source: "local", Created: time.Unix(0, 0).UTC()}
	images := map[name.Reference]v1.Image{}
	for component, ref := range map[string]string{
		"pause": refs.Pause, "memcached": refs.Memcached, "memcached-exporter": refs.Exporter,
		"coredns": refs.CoreDNS, "memcached-cli": refs.Client,
	} {
		built, err := image.Build(ctx, repo, image.LocalComponents[component], md, []v1.Platform{platform}, nil)
		if err != nil {
			return refs, fmt.Errorf("image %s: %w", component, err)
		}
		img, err := platformImage(built.Index, platform)
		if err != nil {
			return refs, err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return refs, err
		}
		images[tag] = img
	}
	if manager, err := image.ReadLayout(filepath.Join(repo, "dist", "images", "manager")); err == nil {
		m, err := manager.Index.IndexManifest()
		if err != nil {
			return refs, err
		}
		version := m.Annotations["org.opencontainers.image.version"]
		img, err := platformImage(manager.Index, platform)
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
		fmt.Fprintf(progress, "cluster: built the node images (%s, %s, %s, %s, %s%s) in %v\n", refs.Pause, refs.Memcached, refs.Exporter, refs.CoreDNS, refs.Client,
			map[bool]string{true: ", " + refs.Manager}[refs.Manager != ""], time.Since(start).Round(time.Millisecond))
	}
	return refs, nil
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
