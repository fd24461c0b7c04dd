package olm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
)

// The catalog of this release validates as `opm validate` checks it, and
// rendering a later release keeps the earlier bundle and makes the new one
// replace it, so that OLM can upgrade installed operators.
func TestCatalogKeepsTheUpgradePath(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bundleDir, catalogDir := filepath.Join(tmp, "bundle"), filepath.Join(tmp, "catalog")
	release := func(b *Bundle) {
		t.Helper()
		if err := b.Write(bundleDir); err != nil {
			t.Fatal(err)
		}
		cfg, err := Catalog(b, b.Image(), bundleDir, catalogDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteCatalog(cfg, catalogDir); err != nil {
			t.Fatal(err)
		}
		if err := ValidateCatalog(catalogDir); err != nil {
			t.Fatalf("opm validate: %v", err)
		}
	}
	release(b)
	first := b.CSV.Name

	next, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	v := semver.MustParse(next.Version())
	v.Minor++
	next.CSV.Spec.Version = version.OperatorVersion{Version: v}
	next.CSV.Name = Package + ".v" + v.String()
	release(next)
	release(next) // re-rendering the same release changes nothing

	raw, err := os.ReadFile(filepath.Join(catalogDir, CatalogFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadCatalog(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Bundles) != 2 || len(cfg.Channels) != 1 {
		t.Fatalf("want 2 bundles in 1 channel, got %d bundles, %d channels", len(cfg.Bundles), len(cfg.Channels))
	}
	entries := cfg.Channels[0].Entries
	if len(entries) != 2 || entries[1].Name != next.CSV.Name || entries[1].Replaces != first {
		t.Fatalf("want %s to replace %s, got entries %+v", next.CSV.Name, first, entries)
	}
	if !strings.Contains(string(raw), "image: registry.example.com/memcached-operator-bundle:v"+v.String()) {
		t.Errorf("the new bundle's image is not in the catalog")
	}
}

// opm's validation does run: a bundle that no channel entry names (here,
// the entry was renamed) is an error.
func TestCatalogValidationCatchesABrokenChannel(t *testing.T) {
	b, err := Generate(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bundleDir, catalogDir := filepath.Join(tmp, "bundle"), filepath.Join(tmp, "catalog")
	if err := b.Write(bundleDir); err != nil {
		t.Fatal(err)
	}
	cfg, err := Catalog(b, b.Image(), bundleDir, catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Channels[0].Entries[0].Name = Package + ".v9.9.9"
	if err := WriteCatalog(cfg, catalogDir); err != nil {
		t.Fatal(err)
	}
	err = ValidateCatalog(catalogDir)
	if err == nil || !strings.Contains(err.Error(), "not found in any channel entries") {
		t.Fatalf("want the orphaned bundle reported, got %v", err)
	}
}
