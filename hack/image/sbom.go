package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SBOMMediaType is the artifact type of the SBOMs attached to the images.
const SBOMMediaType = "application/vnd.cyclonedx+json"

// SBOM is a CycloneDX document of the binaries' Go modules (from their build
// information: the main module, every dependency with its version and
// go.sum hash, the Go toolchain), packed as an OCI artifact whose subject
// is the platform image it describes. Registries that serve the referrers
// API list it under the image; `crane manifest` or `oras discover` find it.
func SBOM(c Component, md Metadata, bins []string, p v1.Platform, subject v1.Descriptor) (v1.Image, error) {
	info, err := buildinfo.ReadFile(bins[0])
	if err != nil {
		return nil, fmt.Errorf("read the build information of %s: %w", bins[0], err)
	}
	doc := cdx.NewBOM()
	doc.SerialNumber = "" // a random serial would make every build differ
	doc.Metadata = &cdx.Metadata{
		Timestamp: md.Created.UTC().Format("2006-01-02T15:04:05Z"),
		Component: &cdx.Component{
			BOMRef: "pkg:oci/" + c.Title, Type: cdx.ComponentTypeContainer, Name: c.Title, Version: md.Version,
			Description: c.Description,
			Properties: &[]cdx.Property{
				{Name: "oci:platform", Value: p.String()},
				{Name: "go:toolchain", Value: info.GoVersion},
				{Name: "vcs:revision", Value: md.Revision},
			},
		},
	}
	// Every binary's modules, once each: the programs of one image share
	// their module, so one application and the union of their libraries.
	comps := []cdx.Component{goModule(info.Main, cdx.ComponentTypeApplication)}
	seen := map[string]bool{info.Main.Path: true}
	for _, bin := range bins {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("read the build information of %s: %w", bin, err)
		}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if id := d.Path + "@" + d.Version; !seen[id] {
				seen[id] = true
				comps = append(comps, goModule(*d, cdx.ComponentTypeLibrary))
			}
		}
	}
	doc.Components = &comps
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return newArtifact(SBOMMediaType, buf.Bytes(), subject, map[string]string{
		"org.opencontainers.image.created": md.Created.UTC().Format("2006-01-02T15:04:05Z"),
	})
}

func goModule(m debug.Module, typ cdx.ComponentType) cdx.Component {
	version := m.Version
	comp := cdx.Component{
		BOMRef: "pkg:golang/" + m.Path + "@" + version, Type: typ, Name: m.Path, Version: version,
		PackageURL: "pkg:golang/" + m.Path + "@" + version,
	}
	if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok && h != "" {
		comp.Properties = &[]cdx.Property{{Name: "go:sum", Value: m.Sum}}
	}
	return comp
}

// artifact is an OCI artifact manifest: an empty config, one blob, a subject.
type artifact struct {
	manifest []byte
	blob     v1.Layer
}

var emptyConfig = []byte("{}")

func newArtifact(artifactType string, data []byte, subject v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	blob := static.NewLayer(data, types.MediaType(artifactType))
	d, err := blob.Digest()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(emptyConfig)
	subject.Platform = nil
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        v1.Descriptor{MediaType: types.OCIEmptyJSON, Size: int64(len(emptyConfig)), Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Data: emptyConfig},
		Layers:        []v1.Descriptor{{MediaType: types.MediaType(artifactType), Size: int64(len(data)), Digest: d}},
		Subject:       &subject,
		Annotations:   annotations,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: raw, blob: blob})
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, _ := a.blob.Digest(); d == h {
		return a.blob, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}
