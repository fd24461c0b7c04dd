package image

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Artifact is one thing a release pushes, and what its verification
// requires beyond the signature.
type Artifact struct {
	// Ref is by tag or by digest; a tag is resolved first, and only the
	// digest is verified.
	Ref string
	// Provenance requires a SLSA provenance attestation on the digest.
	Provenance bool
	// SBOM requires a CycloneDX attestation on each platform image.
	SBOM bool
}

// ReleaseArtifacts are what make release, make helm-push and make
// olm-publish push for version: both images, the bundle and the catalog
// (built here, so with provenance; the binaries' images also with SBOMs)
// and the chart (packaged by helm, so signed only).
func ReleaseArtifacts(registry, version string) []Artifact {
	return []Artifact{
		{Ref: registry + "/memcached-operator:" + version, Provenance: true, SBOM: true},
		{Ref: registry + "/set-image-replicas:" + version, Provenance: true, SBOM: true},
		{Ref: registry + "/charts/memcached-operator:" + ChartVersion(version)},
		{Ref: registry + "/memcached-operator-bundle:" + version, Provenance: true},
		{Ref: registry + "/memcached-operator-catalog:" + version, Provenance: true},
	}
}

// releaseRepositories are the repositories make release, helm-push and
// olm-publish sign, by their last path element.
var releaseRepositories = []string{"memcached-operator", "set-image-replicas", "memcached-operator-bundle", "memcached-operator-catalog"}

// SignedByRelease reports whether repository (REGISTRY/PATH, no tag) is one
// of the release's own, which the release key signs: promotion verifies
// those.
func SignedByRelease(repository string) bool {
	last := repository[strings.LastIndex(repository, "/")+1:]
	return slices.Contains(releaseRepositories, last)
}

// ChartVersion is the chart's version for a release: SemVer, without the
// tag's v (what make helm-push packages with).
func ChartVersion(version string) string { return strings.TrimPrefix(version, "v") }

// Report is what VerifyArtifact found, one field per check; a nil error
// is a pass, and a check not required is left unset.
type Report struct {
	Ref, Digest string
	Resolve     error
	Signature   error
	Provenance  *error
	Commit      string
	SBOMs       map[string]error // platform to result
}

// Err is the first failed check, or nil.
func (r Report) Err() error {
	if r.Resolve != nil {
		return r.Resolve
	}
	if r.Signature != nil {
		return r.Signature
	}
	if r.Provenance != nil && *r.Provenance != nil {
		return *r.Provenance
	}
	for _, err := range r.SBOMs {
		if err != nil {
			return err
		}
	}
	return nil
}

// String is a line per check, as cosign verify and verify-attestation
// would say it.
func (r Report) String() string {
	var b strings.Builder
	if r.Resolve != nil {
		fmt.Fprintf(&b, "%s\n  not found: %v", r.Ref, r.Resolve)
		return b.String()
	}
	fmt.Fprintf(&b, "%s\n  digest:     %s", r.Ref, r.Digest)
	fmt.Fprintf(&b, "\n  signature:  %s", verdict(r.Signature))
	if r.Provenance != nil {
		fmt.Fprintf(&b, "\n  provenance: %s", verdict(*r.Provenance))
		if r.Commit != "" {
			fmt.Fprintf(&b, " (built from commit %s)", r.Commit)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(r.SBOMs)) {
		fmt.Fprintf(&b, "\n  sbom %s: %s", p, verdict(r.SBOMs[p]))
	}
	return b.String()
}

func verdict(err error) string {
	if err == nil {
		return "verified"
	}
	return "NOT VERIFIED: " + err.Error()
}

// VerifyArtifact resolves a's digest and checks its signature and the
// attestations it requires.
func (s Signer) VerifyArtifact(a Artifact) Report {
	r := Report{Ref: a.Ref}
	ref, err := ParseReference(a.Ref)
	if err != nil {
		r.Resolve = err
		return r
	}
	d, ok := ref.(name.Digest)
	if !ok {
		h, err := Digest(a.Ref)
		if err != nil {
			r.Resolve = err
			return r
		}
		d = ref.Context().Digest(h.String())
	}
	r.Digest = d.DigestStr()
	r.Signature = s.Verify(d.String())
	if a.Provenance {
		var perr error
		st, err := s.VerifyAttestation(d.String(), ProvenanceType)
		switch {
		case err != nil:
			perr = err
		default:
			r.Commit, perr = ProvenanceCommit(st.Predicate)
		}
		r.Provenance = &perr
	}
	if a.SBOM {
		r.SBOMs = map[string]error{}
		idx, err := remote.Index(d, RemoteOptions()...)
		if err != nil {
			r.SBOMs["index"] = fmt.Errorf("%s is no image index: %w", d, err)
			return r
		}
		m, err := idx.IndexManifest()
		if err != nil {
			r.SBOMs["index"] = err
			return r
		}
		for _, desc := range m.Manifests {
			if desc.Platform == nil {
				continue
			}
			_, err := s.VerifyAttestation(d.Context().Digest(desc.Digest.String()).String(), SBOMType)
			r.SBOMs[desc.Platform.String()] = err
		}
		if len(r.SBOMs) == 0 {
			r.SBOMs["index"] = errors.New("the index lists no platform images")
		}
	}
	return r
}
