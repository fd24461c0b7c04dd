// Package pins keeps the overlays' image and replica pins: `make pin`,
// `make promote`, `make retarget`, `make kpt-render` and the pinning steps
// of `make release` (bin/pins). Every change is a typed set-image-replicas
// config (krm-functions/set-image-replicas/api/v1alpha1) run in-process by
// the function's own code (its fn package) on the overlay's pins files,
// images.yaml and replicas.yaml; then kpt's `fn render` writes the pins
// into the overlay's kustomizations, as the overlay's Kptfile says. Nothing
// is written unless every step succeeded.
package pins

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"

	"github.com/example/memcached-operator/hack/image"
	"github.com/example/memcached-operator/hack/internal/kustomize"
	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
	"github.com/example/memcached-operator/krm-functions/set-image-replicas/fn"
)

// The names the base manifests give the images: what the overlays pin.
const (
	OperatorImage  = "registry.example.com/memcached-operator"
	MemcachedImage = "memcached"
	ExporterImage  = "quay.io/prometheus/memcached-exporter"
)

// PinByDigestAnnotation on an overlay's images.yaml (prod) makes every
// promotion into it pin each image by tag and by the digest its registry
// serves for the tag.
const PinByDigestAnnotation = "cache.example.com/pin-by-digest"

// Repo is a checkout whose overlays are pinned.
type Repo struct {
	// Root holds overlays/ and bin/ (kpt and set-image-replicas, which the
	// overlays' Kptfiles run).
	Root string
	// Log receives one line per file written and per step.
	Log io.Writer
	// Digest returns the digest a registry serves for a reference; nil
	// asks the registry itself (image.Digest).
	Digest func(ref string) (string, error)
	// Verify checks the release key's signature on a reference by digest;
	// nil uses cosign with COSIGN_PUBLIC_KEY (image.SignerFromEnv).
	Verify func(ref string) error
}

// verifySigned refuses the image pins of data (a SetImageReplicas config)
// that pin one of the release's own images (image.SignedByRelease) to a
// digest without a valid signature from the release key. Upstream images
// (memcached, the exporter) are not signed by that key and are not
// checked.
func (r *Repo) verifySigned(data []byte) error {
	cfg, err := v1alpha1.Decode(data)
	if err != nil {
		return err
	}
	verify := r.Verify
	if verify == nil {
		verify = image.SignerFromEnv().Verify
	}
	for _, pin := range cfg.Images {
		repository := pin.NewName
		if repository == "" {
			repository = pin.Name
		}
		if pin.Digest == "" || !image.SignedByRelease(repository) {
			continue
		}
		if err := verify(repository + "@" + pin.Digest); err != nil {
			return err
		}
		r.logf("verified: %s@%s is signed by the release key", repository, pin.Digest)
	}
	return nil
}

func (r *Repo) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

func (r *Repo) digest(ref string) (string, error) {
	if r.Digest != nil {
		return r.Digest(ref)
	}
	d, err := image.Digest(ref)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// Overlays lists the environments: the directories of overlays/ that hold a
// kustomization.
func (r *Repo) Overlays() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.Root, "overlays"))
	if err != nil {
		return nil, err
	}
	var envs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(r.Root, "overlays", e.Name(), "kustomization.yaml")); e.IsDir() && err == nil {
			envs = append(envs, e.Name())
		}
	}
	return envs, nil
}

func (r *Repo) overlay(env string) (string, error) {
	envs, err := r.Overlays()
	if err != nil {
		return "", err
	}
	if !slices.Contains(envs, env) {
		return "", fmt.Errorf("no overlay %q (want one of: %s)", env, strings.Join(envs, " "))
	}
	return filepath.Join(r.Root, "overlays", env), nil
}

// ParseImage turns repository[:tag][@digest] into an image pin. The name is
// kept as written (a port in the registry host is not a tag), since a pin
// matches the name the manifests use.
func ParseImage(ref string) (v1alpha1.Image, error) {
	parsed, err := reference.Parse(ref)
	if err != nil {
		return v1alpha1.Image{}, fmt.Errorf("image %q: %w (want repository:tag, repository@sha256:... or both)", ref, err)
	}
	named, ok := parsed.(reference.Named)
	if !ok {
		return v1alpha1.Image{}, fmt.Errorf("image %q: no repository (want repository:tag@sha256:...)", ref)
	}
	pin := v1alpha1.Image{Name: named.Name()}
	if t, ok := parsed.(reference.Tagged); ok {
		pin.NewTag = t.Tag()
	}
	if d, ok := parsed.(reference.Digested); ok {
		pin.Digest = d.Digest().String()
	}
	if pin.NewTag == "" && pin.Digest == "" {
		return v1alpha1.Image{}, fmt.Errorf("image %q: give a tag, a digest or both (repository:tag@sha256:...)", ref)
	}
	return pin, nil
}

var replicasPin = regexp.MustCompile(`^([A-Za-z]+)/([a-z0-9.-]+)=([0-9]+)$`)

// ParseReplicas turns Kind/name=count into a replica pin.
func ParseReplicas(pin string) (v1alpha1.Replicas, error) {
	m := replicasPin.FindStringSubmatch(pin)
	if m == nil {
		return v1alpha1.Replicas{}, fmt.Errorf("replicas %q: want Kind/name=count, such as Memcached/app-cache=5", pin)
	}
	count, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return v1alpha1.Replicas{}, fmt.Errorf("replicas %q: %w", pin, err)
	}
	return v1alpha1.Replicas{Kind: m[1], Name: m[2], Count: &count}, nil
}

// write is one file's new content, written only when every change of the
// step was computed without error.
type write struct {
	path string
	data []byte
}

func (r *Repo) commit(writes []write) error {
	for _, w := range writes {
		old, err := os.ReadFile(w.path)
		if err == nil && string(old) == string(w.data) {
			continue
		}
		if err := os.WriteFile(w.path, w.data, 0o644); err != nil {
			return err
		}
		r.logf("pinned %s", r.rel(w.path))
	}
	return nil
}

func (r *Repo) rel(path string) string {
	if rel, err := filepath.Rel(r.Root, path); err == nil {
		return rel
	}
	return path
}

// applyTo runs cfg on the pins file at path and returns its new content.
func (r *Repo) applyTo(cfg *v1alpha1.SetImageReplicas, path string) (write, error) {
	in, err := os.ReadFile(path)
	if err != nil {
		return write{}, err
	}
	out, err := fn.Apply(cfg, in)
	if err != nil {
		return write{}, fmt.Errorf("set-image-replicas rejected %s for %s: %w", cfg.Metadata.Name, r.rel(path), err)
	}
	return write{path, out}, nil
}

// Pin sets the given image and replica pins in env's pins files, then
// renders them. Only pins the overlay already has can change: a typo fails
// (failOnEmptyMatch) instead of adding a pin nothing uses. With resolve,
// each image given by tag is pinned by the digest its registry serves.
func (r *Repo) Pin(env string, images, replicas []string, resolve bool) error {
	dir, err := r.overlay(env)
	if err != nil {
		return err
	}
	if len(images) == 0 && len(replicas) == 0 {
		return errors.New("nothing to pin: give IMAGE=repository:tag[@digest] and/or REPLICAS=\"Kind/name=count\"")
	}
	var writes []write
	if len(images) > 0 {
		cfg := fn.New("requested-pins")
		cfg.FailOnEmptyMatch = true
		for _, ref := range images {
			pin, err := ParseImage(ref)
			if err != nil {
				return err
			}
			cfg.Images = append(cfg.Images, pin)
		}
		if resolve {
			if err := r.resolve(cfg); err != nil {
				return fmt.Errorf("could not resolve the digests: %w; nothing was changed", err)
			}
			raw, err := fn.Encode(cfg)
			if err != nil {
				return err
			}
			if err := r.verifySigned(raw); err != nil {
				return fmt.Errorf("refusing to pin an unverified digest: %w; nothing was changed", err)
			}
		}
		w, err := r.applyTo(cfg, filepath.Join(dir, "images.yaml"))
		if err != nil {
			return fmt.Errorf("%w; nothing was changed", err)
		}
		writes = append(writes, w)
	}
	if len(replicas) > 0 {
		cfg := fn.New("requested-pins")
		cfg.FailOnEmptyMatch = true
		for _, p := range replicas {
			pin, err := ParseReplicas(p)
			if err != nil {
				return err
			}
			cfg.Replicas = append(cfg.Replicas, pin)
		}
		w, err := r.applyTo(cfg, filepath.Join(dir, "replicas.yaml"))
		if err != nil {
			return fmt.Errorf("%w; nothing was changed", err)
		}
		writes = append(writes, w)
	}
	if err := r.commit(writes); err != nil {
		return err
	}
	return r.Render(env)
}

// resolve gives each image pin of cfg the digest its registry serves for
// its tag (image.ResolvePinsYAML: a digest already given must match).
func (r *Repo) resolve(cfg *v1alpha1.SetImageReplicas) error {
	raw, err := fn.Encode(cfg)
	if err != nil {
		return err
	}
	resolved, err := image.ResolvePinsYAML("the requested pins", raw, r.digest)
	if err != nil {
		return err
	}
	out, err := v1alpha1.Decode(resolved)
	if err != nil {
		return err
	}
	*cfg = *out
	return nil
}

// Promote copies the image pins of from into to (never the replica
// counts, which are per environment) and renders them. A target that pins
// by digest (PinByDigestAnnotation) gets every image, its own included, by
// the digest its registry serves: a digest is never typed by hand.
func (r *Repo) Promote(from, to string) error {
	fromDir, err := r.overlay(from)
	if err != nil {
		return err
	}
	toDir, err := r.overlay(to)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(fromDir, "images.yaml"))
	if err != nil {
		return err
	}
	cfg, err := v1alpha1.Decode(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", r.rel(filepath.Join(fromDir, "images.yaml")), err)
	}
	target := filepath.Join(toDir, "images.yaml")
	w, err := r.applyTo(cfg, target)
	if err != nil {
		return fmt.Errorf("set-image-replicas refused the promotion: %w; nothing was changed", err)
	}
	targetCfg, err := v1alpha1.Decode(w.data)
	if err != nil {
		return err
	}
	if targetCfg.Metadata.Annotations[PinByDigestAnnotation] == "true" {
		r.logf("promote: %s pins by digest; resolving each tag's digest from its registry ...", to)
		if w.data, err = image.ResolvePinsYAML(r.rel(target), w.data, r.digest); err != nil {
			return fmt.Errorf("the registry does not confirm the pins of %s: %w; nothing was changed", to, err)
		}
	}
	if err := r.verifySigned(w.data); err != nil {
		return fmt.Errorf("refusing to promote an unverified digest to %s: %w; nothing was changed", to, err)
	}
	if err := r.commit([]write{w}); err != nil {
		return err
	}
	if err := r.Render(to); err != nil {
		return err
	}
	r.logf("promoted the image pins of %s to %s; review with 'git diff overlays/%s' and commit", from, to, to)
	return nil
}

// Retarget points every image of every overlay at registry, for a fork
// that ships to its own registry or a mirror of the upstream images: the
// pins keep the names the base manifests use and gain a newName, so later
// pins, releases and promotions name the new repositories.
func (r *Repo) Retarget(registry string) error {
	if _, err := reference.ParseNormalizedNamed(registry + "/memcached-operator"); err != nil {
		return fmt.Errorf("REGISTRY=%s: %w (want a registry and path, such as ghcr.io/you or localhost:5000)", registry, err)
	}
	cfg := fn.New("retarget")
	cfg.Images = []v1alpha1.Image{
		{Name: OperatorImage, NewName: registry + "/memcached-operator"},
		{Name: MemcachedImage, NewName: registry + "/memcached"},
		{Name: ExporterImage, NewName: registry + "/memcached-exporter"},
	}
	envs, err := r.Overlays()
	if err != nil {
		return err
	}
	var writes []write
	for _, env := range envs {
		w, err := r.applyTo(cfg, filepath.Join(r.Root, "overlays", env, "images.yaml"))
		if err != nil {
			return fmt.Errorf("%w; nothing was changed", err)
		}
		writes = append(writes, w)
	}
	if err := r.commit(writes); err != nil {
		return err
	}
	for _, env := range envs {
		if err := r.Render(env); err != nil {
			return err
		}
	}
	r.logf("retargeted every overlay to %s; review with 'git diff overlays' and commit", registry)
	return nil
}

// ReleaseManifest is kubebuilder's build-installer: the CRD, RBAC and
// manager of deploy/base in one file, the manager pinned to the release's
// tag and digest.
func (r *Repo) ReleaseManifest(base []byte, registry, version, digest string) ([]byte, error) {
	cfg := fn.New("release")
	cfg.FailOnEmptyMatch = true
	cfg.Images = []v1alpha1.Image{{Name: OperatorImage, NewName: registry + "/memcached-operator", NewTag: version, Digest: digest}}
	out, err := fn.Apply(cfg, base)
	if err != nil {
		return nil, fmt.Errorf("pin the release manifest: %w", err)
	}
	return out, nil
}

// Manifests returns env's overlay as kustomize builds it: what `make
// render` prints and `make deploy` applies. With img (the seed's `export
// IMG=...; make docker-build docker-push deploy`), the manager runs img
// instead of the overlay's pin, through the function on the built output:
// the overlay's files are not changed, since their pins are what GitOps
// deploys.
func (r *Repo) Manifests(env, img string) ([]byte, error) {
	dir, err := r.overlay(env)
	if err != nil {
		return nil, err
	}
	built, err := kustomize.BuildYAML(dir)
	if err != nil || img == "" {
		return built, err
	}
	want, err := ParseImage(img)
	if err != nil {
		return nil, fmt.Errorf("IMG: %w", err)
	}
	// The manager's repository in the built output: the newName of the
	// overlay's operator pin (after make retarget), else the base's name.
	raw, err := os.ReadFile(filepath.Join(dir, "images.yaml"))
	if err != nil {
		return nil, err
	}
	pinned, err := v1alpha1.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.rel(filepath.Join(dir, "images.yaml")), err)
	}
	current := OperatorImage
	for _, p := range pinned.Images {
		if p.Name == OperatorImage && p.NewName != "" {
			current = p.NewName
		}
	}
	cfg := fn.New("img")
	cfg.FailOnEmptyMatch = true
	// IMG replaces the pin, a digest-pinned one (prod) included.
	cfg.Images = []v1alpha1.Image{{Name: current, NewName: want.Name, NewTag: want.NewTag, Digest: want.Digest, DropDigest: want.Digest == ""}}
	out, err := fn.Apply(cfg, built)
	if err != nil {
		return nil, fmt.Errorf("run the manager on %s: %w", img, err)
	}
	return out, nil
}
