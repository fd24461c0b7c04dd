package image

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Role annotations tell the image index from its SBOMs in an OCI layout.
const (
	roleAnnotation = "cache.example.com/role"
	roleIndex      = "image"
	roleSBOM       = "sbom"
)

// WriteLayout writes a build into a fresh OCI image layout at dir (what
// `make docker-build` leaves in dist/images/<component>).
func WriteLayout(dir string, b *Built) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(b.Index, layout.WithAnnotations(map[string]string{roleAnnotation: roleIndex})); err != nil {
		return err
	}
	for _, s := range b.SBOMs {
		if err := p.AppendImage(s, layout.WithAnnotations(map[string]string{roleAnnotation: roleSBOM})); err != nil {
			return err
		}
	}
	// Beside the layout, not in it: the provenance describes the build,
	// and is attested (signed) only when the image is pushed.
	return os.WriteFile(filepath.Join(dir, provenanceFile), b.Provenance, 0o644)
}

// provenanceFile is where WriteLayout keeps the build's provenance.
const provenanceFile = "provenance.json"

// ReadLayout reads back what WriteLayout wrote.
func ReadLayout(dir string) (*Built, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI layout (run make docker-build first): %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	b := &Built{}
	for _, d := range m.Manifests {
		switch d.Annotations[roleAnnotation] {
		case roleIndex:
			if b.Index, err = idx.ImageIndex(d.Digest); err != nil {
				return nil, err
			}
		case roleSBOM:
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			b.SBOMs = append(b.SBOMs, img)
		}
	}
	if b.Index == nil {
		return nil, fmt.Errorf("%s holds no image index", dir)
	}
	if b.Provenance, err = os.ReadFile(filepath.Join(dir, provenanceFile)); err != nil {
		return nil, fmt.Errorf("%s has no provenance (rebuild it with make docker-build): %w", dir, err)
	}
	return b, nil
}
