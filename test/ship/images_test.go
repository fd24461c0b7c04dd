// Package ship proves the ship path without a container runtime: the
// images build reproducibly and minimally, run from their own root
// filesystems, agree with the Dockerfiles, and a release through a real
// registry pins real digests all the way to a cluster.
package ship

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/example/memcached-operator/hack/image"
	"github.com/example/memcached-operator/test/internal/repo"
)

// metadata is what `make docker-build` stamps: the commit and its time.
func metadata(t *testing.T, root, version string) image.Metadata {
	t.Helper()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	secs, err := strconv.ParseInt(git("log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return image.Metadata{Version: version, Revision: git("rev-parse", "HEAD"), Source: "https://github.com/example/memcached-operator", Created: time.Unix(secs, 0).UTC()}
}

// built caches one build per component for the tests of this package.
var built struct {
	sync.Mutex
	m map[string]*image.Built
}

func buildImage(t *testing.T, component string) *image.Built {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if b, ok := built.m[component]; ok {
		return b
	}
	root := repo.MustRoot(t)
	start := time.Now()
	b, err := image.Build(context.Background(), root, image.Components[component], metadata(t, root, "v0.0.0-test"), image.Platforms, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s for %d platforms in %v", component, len(image.Platforms), time.Since(start).Round(time.Millisecond))
	if built.m == nil {
		built.m = map[string]*image.Built{}
	}
	built.m[component] = b
	return b
}

// Each image is an index for linux/amd64 and linux/arm64 of images that
// hold only their binary and the nonroot user, run as that user, carry the
// OCI labels with the commit's time, have an SBOM attached, and come out
// byte for byte the same when built again from the same commit.
func TestImagesAreMinimalAndReproducible(t *testing.T) {
	for _, component := range []string{"manager", "set-image-replicas"} {
		t.Run(component, func(t *testing.T) {
			c := image.Components[component]
			b := buildImage(t, component)
			root := repo.MustRoot(t)
			md := metadata(t, root, "v0.0.0-test")
			again, err := image.Build(context.Background(), root, c, md, image.Platforms, nil)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := b.Index.Digest()
			second, _ := again.Index.Digest()
			if first != second {
				t.Errorf("two builds of one commit differ: %s and %s", first, second)
			}
			checkIndex(t, c, md, b.Index)
			if len(b.SBOMs) != len(image.Platforms) {
				t.Errorf("%d SBOMs for %d platform images", len(b.SBOMs), len(image.Platforms))
			}
			for _, s := range b.SBOMs {
				m, err := s.Manifest()
				if err != nil {
					t.Fatal(err)
				}
				if m.ArtifactType != image.SBOMMediaType || m.Subject == nil {
					t.Errorf("SBOM manifest: artifactType %q, subject %v", m.ArtifactType, m.Subject)
				}
			}
		})
	}
}

// checkIndex inspects an index as pulled or built.
func checkIndex(t *testing.T, c image.Component, md image.Metadata, idx v1.ImageIndex) {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want the nonroot 65532:65532", d.Platform, cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{c.Path}) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %v cmd %v, want [%s]", d.Platform, cf.Config.Entrypoint, cf.Config.Cmd, c.Path)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.source":   md.Source,
			"org.opencontainers.image.revision": md.Revision,
			"org.opencontainers.image.version":  md.Version,
			"org.opencontainers.image.created":  md.Created.Format(time.RFC3339),
		} {
			if got := cf.Config.Labels[k]; got != want {
				t.Errorf("%s: label %s = %q, want %q", d.Platform, k, got, want)
			}
		}
		if !cf.Created.Equal(md.Created) {
			t.Errorf("%s: created %v, want the commit time %v", d.Platform, cf.Created, md.Created)
		}
		files, uncompressed := contents(t, img)
		want := []string{"etc/group", "etc/passwd"}
		for _, p := range c.Programs() {
			want = append(want, strings.TrimPrefix(p.Path, "/"))
		}
		slices.Sort(want)
		if !slices.Equal(files, want) {
			t.Errorf("%s: files %v, want only %v (no shell, nothing else)", d.Platform, files, want)
		}
		var compressed int64
		layers, _ := img.Layers()
		for _, l := range layers {
			size, _ := l.Size()
			compressed += size
		}
		t.Logf("%s %s: %.1f MiB compressed, %.1f MiB uncompressed", c.Name, d.Platform, float64(compressed)/(1<<20), float64(uncompressed)/(1<<20))
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
}

// contents lists the regular files of an image's filesystem and their size.
func contents(t *testing.T, img v1.Image) ([]string, int64) {
	t.Helper()
	var files []string
	var size int64
	walk(t, img, func(h *tar.Header, _ io.Reader) {
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
			size += h.Size
		}
	})
	slices.Sort(files)
	return files, size
}

// walk calls fn for every entry of an image's flattened filesystem, as a
// container runtime unpacks it (mutate.Extract applies the layers and
// their whiteouts).
func walk(t *testing.T, img v1.Image, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}

// extract writes the filesystem of the image for this machine's platform
// into a directory any user can reach, as a container runtime would.
func extract(t *testing.T, idx v1.ImageIndex) string {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var img v1.Image
	for _, d := range m.Manifests {
		if d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			if img, err = idx.Image(d.Digest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if img == nil {
		t.Fatalf("no image for linux/%s", runtime.GOARCH)
	}
	root, err := os.MkdirTemp("", "rootfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	walk(t, img, func(h *tar.Header, r io.Reader) {
		dst := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, r); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}
	})
	return root
}

// pull reads an index back from a registry.
func pull(t *testing.T, ref string) v1.ImageIndex {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return idx
}
