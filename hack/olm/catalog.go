package olm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
	"github.com/operator-framework/operator-registry/pkg/image"
	"github.com/operator-framework/operator-registry/pkg/lib/config"
	"github.com/operator-framework/operator-registry/pkg/registry"
)

// CatalogDir holds the file-based catalog: one directory per package, as
// `opm init`/`opm render` lay it out.
const CatalogDir = "catalog"

// CatalogFile is the package's catalog, relative to CatalogDir.
var CatalogFile = filepath.Join(Package, "catalog.yaml")

// Catalog renders the bundle written in bundleDir, published as
// bundleImage (b.Image() in the committed catalog; a pushed digest when
// publishing), into the file-based catalog in catalogDir, as `opm render
// <bundle dir>` does, and returns the
// whole package: its olm.package, a stable channel in which each release
// replaces the one before, and every olm.bundle. Bundles of earlier
// releases already in the catalog are kept, so upgrades keep their path;
// the bundle of this release replaces its previous rendering.
func Catalog(b *Bundle, bundleImage, bundleDir, catalogDir string) (*declcfg.DeclarativeConfig, error) {
	rendered, err := renderBundle(bundleDir, bundleImage)
	if err != nil {
		return nil, err
	}
	bundles := []declcfg.Bundle{*rendered}
	existing, err := loadCatalog(catalogDir)
	if err != nil {
		return nil, err
	}
	for _, old := range existing.Bundles {
		if old.Name != rendered.Name {
			bundles = append(bundles, old)
		}
	}
	versions := map[string]semver.Version{}
	for _, bundle := range bundles {
		v, err := bundleVersion(bundle)
		if err != nil {
			return nil, err
		}
		versions[bundle.Name] = v
	}
	sort.Slice(bundles, func(i, j int) bool { return versions[bundles[i].Name].LT(versions[bundles[j].Name]) })

	channel := declcfg.Channel{Schema: declcfg.SchemaChannel, Package: Package, Name: Channel}
	for i, bundle := range bundles {
		entry := declcfg.ChannelEntry{Name: bundle.Name}
		if i > 0 {
			entry.Replaces = bundles[i-1].Name
		}
		channel.Entries = append(channel.Entries, entry)
	}
	pkg := declcfg.Package{
		Schema: declcfg.SchemaPackage, Name: Package, DefaultChannel: Channel,
		Description: b.CSV.Spec.Description,
	}
	if icons := b.CSV.Spec.Icon; len(icons) > 0 {
		data, err := base64.StdEncoding.DecodeString(icons[0].Data)
		if err != nil {
			return nil, err
		}
		pkg.Icon = &declcfg.Icon{Data: data, MediaType: icons[0].MediaType}
	}
	return &declcfg.DeclarativeConfig{Packages: []declcfg.Package{pkg}, Channels: []declcfg.Channel{channel}, Bundles: bundles}, nil
}

// renderBundle is opm's renderBundleDirectory with the bundle image set,
// without opm's container-image registry (which needs containerd and
// gpgme): the bundle parser and property extraction are operator-registry's.
func renderBundle(dir, bundleImage string) (*declcfg.Bundle, error) {
	input, err := registry.NewImageInput(image.SimpleReference(bundleImage), dir)
	if err != nil {
		return nil, fmt.Errorf("parse the bundle in %s: %w", dir, err)
	}
	b := input.Bundle
	objects, properties, err := registry.ObjectsAndPropertiesFromBundle(b)
	if err != nil {
		return nil, fmt.Errorf("bundle %s properties: %w", b.Name, err)
	}
	csv, err := b.ClusterServiceVersion()
	if err != nil {
		return nil, err
	}
	csvJSON, err := json.Marshal(csv)
	if err != nil {
		return nil, err
	}
	// Related images, as opm lists them: the bundle image, then the
	// operator's images from the install strategy.
	related := []declcfg.RelatedImage{{Image: bundleImage}}
	operatorImages, err := csv.GetOperatorImages()
	if err != nil {
		return nil, err
	}
	for img := range operatorImages {
		related = append(related, declcfg.RelatedImage{Image: img})
	}
	sort.Slice(related, func(i, j int) bool { return related[i].Image < related[j].Image })
	// opm moves the bundle objects to the end of the properties.
	var others, objs []property.Property
	for _, p := range properties {
		if p.Type == property.TypeBundleObject || p.Type == property.TypeCSVMetadata {
			objs = append(objs, p)
		} else {
			others = append(others, p)
		}
	}
	return &declcfg.Bundle{
		Schema: declcfg.SchemaBundle, Name: b.Name, Package: b.Package, Image: bundleImage,
		Properties: append(others, objs...), RelatedImages: related, Objects: objects, CsvJSON: string(csvJSON),
	}, nil
}

func bundleVersion(b declcfg.Bundle) (semver.Version, error) {
	props, err := property.Parse(b.Properties)
	if err != nil {
		return semver.Version{}, err
	}
	if len(props.Packages) != 1 {
		return semver.Version{}, fmt.Errorf("bundle %s has %d olm.package properties, want 1", b.Name, len(props.Packages))
	}
	return semver.Parse(props.Packages[0].Version)
}

func loadCatalog(dir string) (*declcfg.DeclarativeConfig, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &declcfg.DeclarativeConfig{}, nil
	}
	cfg, err := declcfg.LoadFS(context.Background(), os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("load the catalog in %s: %w", dir, err)
	}
	return cfg, nil
}

// WriteCatalog writes cfg as catalogDir/CatalogFile, in opm's YAML.
func WriteCatalog(cfg *declcfg.DeclarativeConfig, catalogDir string) error {
	var buf bytes.Buffer
	if err := declcfg.WriteYAML(*cfg, &buf); err != nil {
		return err
	}
	// The header goes into the first document: opm refuses a document
	// that holds only a comment.
	body := bytes.TrimPrefix(buf.Bytes(), []byte("---\n"))
	buf = *bytes.NewBufferString("# Generated by `make bundle` (hack/olm): do not edit; each release adds its bundle.\n")
	buf.Write(body)
	path := filepath.Join(catalogDir, CatalogFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// ValidateCatalog checks the catalog in dir with the function `opm
// validate` runs: load every file-based config, build the package model
// and validate it (schemas, channel heads, the replaces graph).
func ValidateCatalog(dir string) error {
	return config.Validate(context.Background(), os.DirFS(dir))
}
