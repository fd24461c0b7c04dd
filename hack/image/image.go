// Package image builds the repository's container images without a
// container runtime: each Go binary is cross-compiled for every platform
// and laid into an OCI image with go-containerregistry, on an empty base
// that holds nothing but the binary, /etc/passwd and /etc/group for the
// non-root user 65532, and the OCI labels. The platforms make one OCI
// image index; each image gets a CycloneDX SBOM attached as an OCI
// artifact (its subject is the image), read from the binary's own build
// information.
//
// Builds are reproducible: the same commit and Go version give the same
// digests, because the binaries are built with -trimpath and without VCS
// stamping, and every timestamp (files, config, labels) is the commit time
// (SOURCE_DATE_EPOCH).
//
// go-containerregistry rather than ko: ko builds on a base image pulled from
// a registry (cgr.dev/chainguard/static by default), which this repository's
// machines cannot reach, and hides the layout, the labels and the SBOM this
// package controls; the base here is written by hand, a few bytes.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// UID and GID of the images' user, as distroless' nonroot.
const (
	UID  = 65532
	User = "65532:65532"
)

// Component is one of the repository's images.
type Component struct {
	// Name is the binary's name.
	Name string
	// Module is the directory of its Go module, relative to the repository.
	Module string
	// Package is the main package, relative to Module; empty for an image
	// of files only (the OLM bundle).
	Package string
	// Also are more programs of the same module, built the same way and
	// put beside the entrypoint: the manager image's reloader.
	Also []Program
	// Tags are the binary's build tags.
	Tags []string
	// Path is where the binary lives in the image; it is the entrypoint.
	Path string
	// Cmd are the entrypoint's default arguments.
	Cmd []string
	// VersionVar is the -X variable that receives the version, if any.
	VersionVar string
	// Title and Description become OCI labels.
	Title, Description string
	// Files are copied into the image: its path, from a file or directory
	// of the repository.
	Files map[string]string
	// Labels are more config labels; AnnotationsFile, a YAML file whose
	// `annotations:` map is also added as labels (an OLM bundle's
	// metadata/annotations.yaml, which its image must carry as labels).
	Labels          map[string]string
	AnnotationsFile string
	// WritableTmp adds a /tmp the non-root user can write to.
	WritableTmp bool
	// Binary, instead of Package, is a program already on this machine
	// (absolute, or relative to the repository): bin/coredns, or Debian's
	// /usr/bin/memcached. It goes to Path with the shared libraries ldd
	// finds for it, so only for this machine's platform: these are the
	// local cluster's images (LocalComponents), never shipped.
	Binary string
	// UID and UserName replace the nonroot user 65532 (memcached's
	// official image runs as 11211, memcache).
	UID      int
	UserName string
}

// Program is one more binary of a component's module.
type Program struct {
	// Package is its main package, relative to the component's Module.
	Package string
	// Path is where it lives in the image.
	Path string
}

// Programs are the component's binaries, the entrypoint first.
func (c Component) Programs() []Program {
	if c.Package == "" {
		return nil
	}
	return append([]Program{{Package: c.Package, Path: c.Path}}, c.Also...)
}

// Components are the images this repository ships.
var Components = map[string]Component{
	"manager": {
		Name: "manager", Module: "operator", Package: "./cmd", Path: "/manager", VersionVar: "main.version",
		// The cache pods' sidecar (--reloader-image is this image).
		Also:  []Program{{Package: "./cmd/reloader", Path: "/reloader"}},
		Title: "memcached-operator", Description: "Kubernetes operator for memcached (cache.example.com/v1alpha1 Memcached)",
	},
	"set-image-replicas": {
		Name: "set-image-replicas", Module: "krm-functions/set-image-replicas", Package: ".", Path: "/usr/local/bin/set-image-replicas",
		Title: "set-image-replicas", Description: "KRM function that pins container images and replica counts",
	},
	// The OLM bundle image, as bundle.Dockerfile describes it: the
	// manifests and metadata, labelled with the metadata's annotations.
	"bundle": {
		Name: "bundle", Title: "memcached-operator-bundle", Description: "OLM bundle (registry+v1) of memcached-operator",
		Files:           map[string]string{"/manifests": "bundle/manifests", "/metadata": "bundle/metadata"},
		AnnotationsFile: "bundle/metadata/annotations.yaml",
	},
	// The file-based catalog image, as OLM's catalog images are made:
	// operator-registry's opm (pinned in tools/go.mod, built as its releases
	// are: pure-Go OpenPGP) serving /configs over gRPC on :50051.
	"catalog": {
		Name: "opm", Module: "tools", Package: "github.com/operator-framework/operator-registry/cmd/opm", Tags: []string{"containers_image_openpgp"},
		Path: "/bin/opm", Cmd: []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		Title: "memcached-operator-catalog", Description: "OLM file-based catalog of memcached-operator",
		Files:       map[string]string{"/configs": "catalog"},
		Labels:      map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"},
		WritableTmp: true,
	},
}

// Metadata describes the build; it becomes the OCI labels.
type Metadata struct {
	Version  string
	Revision string
	Source   string
	// Created is the commit time (SOURCE_DATE_EPOCH): every timestamp in
	// the image is this one.
	Created time.Time
}

// LDFlags are the linker flags of a component's binary: stripped, with the
// version stamped where the component has a version variable.
func (c Component) LDFlags(version string) string {
	flags := "-s -w"
	if c.VersionVar != "" {
		flags += " -X " + c.VersionVar + "=" + version
	}
	return flags
}

// GoBuildArgs is the `go build` command line of one of a component's
// programs (its main package pkg). The Dockerfiles run the same flags;
// test/ship checks that they do. -gcflags=all=-dwarf=false: the binary is
// stripped (-s -w), so the compiler need not write debug information the
// linker drops; it is the Makefile's GOFLAGS too, so make build and the
// images share compiled packages.
func (c Component) GoBuildArgs(pkg, version, out string) []string {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-gcflags=all=-dwarf=false"}
	if len(c.Tags) > 0 {
		args = append(args, "-tags", strings.Join(c.Tags, ","))
	}
	return append(args, "-ldflags", c.LDFlags(version), "-o", out, pkg)
}

// GoBuildEnv is the environment of that build for a platform: static
// (CGO_ENABLED=0), cross-compiled.
func GoBuildEnv(p v1.Platform) []string {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture, "GOWORK=off", "GOFLAGS=-mod=readonly"}
	if p.Architecture == "arm" && p.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// Platforms the images are built for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Built is an image index, the SBOM artifact of each of its images, and
// the build's SLSA provenance (attested when the release is signed).
type Built struct {
	Index      v1.ImageIndex
	SBOMs      []v1.Image
	Provenance []byte
}

// Build compiles the component for every platform and returns its image
// index. repo is the repository root; progress gets a line per step.
func Build(ctx context.Context, repo string, c Component, md Metadata, platforms []v1.Platform, progress io.Writer) (*Built, error) {
	started := time.Now()
	work, err := os.MkdirTemp("", "image-"+c.Name+"-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()

	base, err := baseLayer(md.Created, c.uid(), c.userName())
	if err != nil {
		return nil, err
	}
	extra, err := c.filesLayer(repo, md.Created)
	if err != nil {
		return nil, err
	}
	cfgLabels, err := c.configLabels(repo, md)
	if err != nil {
		return nil, err
	}
	out := &Built{}
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		start := time.Now()
		// bins are the image's binaries, in the order of c.Programs().
		var bins []string
		if c.Binary != "" {
			bin := c.Binary
			if !filepath.IsAbs(bin) {
				bin = filepath.Join(repo, bin)
			}
			bins = []string{bin}
		}
		for _, prog := range c.Programs() {
			bin := filepath.Join(work, p.OS+"-"+p.Architecture, filepath.Base(prog.Path))
			cmd := exec.CommandContext(ctx, "go", c.GoBuildArgs(prog.Package, md.Version, bin)...)
			cmd.Dir = filepath.Join(repo, c.Module)
			cmd.Env = append(os.Environ(), GoBuildEnv(p)...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build %s (%s) for %s: %w\n%s", c.Name, prog.Package, p, err, b)
			}
			bins = append(bins, bin)
		}
		img, err := platformImage(c, md, p, base, bins, extra, cfgLabels)
		if err != nil {
			return nil, err
		}
		desc, err := descriptor(img, p)
		if err != nil {
			return nil, err
		}
		if len(bins) > 0 && c.Binary == "" {
			sbom, err := SBOM(c, md, bins, p, desc)
			if err != nil {
				return nil, err
			}
			out.SBOMs = append(out.SBOMs, sbom)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		if progress != nil {
			fmt.Fprintf(progress, "image: built %s for %s (%s) in %v\n", c.Name, p, desc.Digest, time.Since(start).Round(time.Millisecond))
		}
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	out.Index = mutate.Annotations(idx, labels(c, md)).(v1.ImageIndex)
	if out.Provenance, err = Provenance(repo, c, md, platforms, started, time.Now()); err != nil {
		return nil, err
	}
	return out, nil
}

// labels are the OCI annotations of the image (as config labels and on
// the index).
func labels(c Component, md Metadata) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       c.Title,
		"org.opencontainers.image.description": c.Description,
		"org.opencontainers.image.source":      md.Source,
		"org.opencontainers.image.revision":    md.Revision,
		"org.opencontainers.image.version":     md.Version,
		"org.opencontainers.image.created":     md.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

func platformImage(c Component, md Metadata, p v1.Platform, base v1.Layer, bins []string, extra v1.Layer, cfgLabels map[string]string) (v1.Image, error) {
	layers := []mutate.Addendum{{Layer: base, History: v1.History{Created: v1.Time{Time: md.Created}, CreatedBy: "passwd and group for the user " + c.user(), Comment: "memcached-operator hack/image"}}}
	if len(bins) > 0 {
		var files []file
		var commands []string
		for i, prog := range c.Programs() {
			data, err := os.ReadFile(bins[i])
			if err != nil {
				return nil, err
			}
			files = append(files, file{path: prog.Path, mode: 0o755, data: data})
			commands = append(commands, "go "+strings.Join(c.GoBuildArgs(prog.Package, md.Version, prog.Path), " "))
		}
		createdBy, comment := strings.Join(commands, " && "), runtime.Version()
		if c.Binary != "" {
			data, err := os.ReadFile(bins[0])
			if err != nil {
				return nil, err
			}
			libs, err := sharedLibraries(bins[0])
			if err != nil {
				return nil, err
			}
			files = append([]file{{path: c.Path, mode: 0o755, data: data}}, libs...)
			createdBy, comment = "copy "+c.Binary+" and its shared libraries", "memcached-operator hack/image"
		}
		binLayer, err := tarLayer(md.Created, files)
		if err != nil {
			return nil, err
		}
		layers = append(layers, mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: md.Created}, CreatedBy: createdBy, Comment: comment}})
	}
	if extra != nil {
		layers = append(layers, mutate.Addendum{Layer: extra, History: v1.History{Created: v1.Time{Time: md.Created}, CreatedBy: "files " + strings.Join(c.fileSources(), " "), Comment: "memcached-operator hack/image"}})
	}
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: md.Created}
	cf.Config = v1.Config{
		User:       c.user(),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Labels:     cfgLabels,
	}
	if len(bins) > 0 {
		cf.Config.Entrypoint, cf.Config.Cmd = []string{c.Path}, c.Cmd
	}
	return mutate.ConfigFile(img, cf)
}

func descriptor(img v1.Image, p v1.Platform) (v1.Descriptor, error) {
	d, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := img.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: d, Platform: &p}, nil
}

type file struct {
	path string
	mode int64
	data []byte
	dir  bool
}

// fileSources are the repository paths of Files, sorted.
func (c Component) fileSources() []string {
	var out []string
	for _, src := range c.Files {
		out = append(out, src)
	}
	sort.Strings(out)
	return out
}

// filesLayer holds Files (and /tmp with WritableTmp), in a fixed order;
// nil when there are none.
func (c Component) filesLayer(repo string, created time.Time) (v1.Layer, error) {
	if len(c.Files) == 0 && !c.WritableTmp {
		return nil, nil
	}
	var files []file
	if c.WritableTmp {
		files = append(files, file{path: "/tmp", mode: 0o1777, dir: true})
	}
	dsts := make([]string, 0, len(c.Files))
	for dst := range c.Files {
		dsts = append(dsts, dst)
	}
	sort.Strings(dsts)
	for _, dst := range dsts {
		src := filepath.Join(repo, c.Files[dst])
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(src, path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files = append(files, file{path: filepath.ToSlash(filepath.Join(dst, rel)), mode: 0o644, data: data})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Files[dst], err)
		}
	}
	return tarLayer(created, files)
}

// configLabels are the OCI labels plus Labels and AnnotationsFile's.
func (c Component) configLabels(repo string, md Metadata) (map[string]string, error) {
	out := labels(c, md)
	for k, v := range c.Labels {
		out[k] = v
	}
	if c.AnnotationsFile != "" {
		raw, err := os.ReadFile(filepath.Join(repo, c.AnnotationsFile))
		if err != nil {
			return nil, err
		}
		var doc struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := sigsyaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", c.AnnotationsFile, err)
		}
		for k, v := range doc.Annotations {
			out[k] = v
		}
	}
	return out, nil
}

func (c Component) uid() int {
	if c.UID != 0 {
		return c.UID
	}
	return UID
}

func (c Component) userName() string {
	if c.UserName != "" {
		return c.UserName
	}
	return "nonroot"
}

// user is the image config's User: uid:gid, numeric, so that the kubelet
// can check runAsNonRoot without reading /etc/passwd.
func (c Component) user() string { return fmt.Sprintf("%d:%d", c.uid(), c.uid()) }

// baseLayer is all the image has besides its binary: its user (and root,
// which tools expect to find) in /etc/passwd and /etc/group.
func baseLayer(created time.Time, uid int, name string) (v1.Layer, error) {
	return tarLayer(created, []file{
		{path: "/etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", name, uid, uid, name, name)},
		{path: "/etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", name, uid)},
	})
}

// tarLayer writes files (and their parent directories) into a layer with
// fixed owners, modes and times, so the same files give the same digest.
func tarLayer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(f.path, "/")
		var parents []string
		if f.dir {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: f.mode, ModTime: created, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			dirs[rel] = true
			continue
		}
		for d := filepath.Dir(rel); d != "." && !dirs[d]; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.mode, Size: int64(len(f.data)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
