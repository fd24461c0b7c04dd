package olm

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
)

// The Subscription resolves in the committed catalog: its CatalogSource is
// the one Install makes, its package and channel are the catalog's, and
// its starting CSV is a bundle of that channel; its OperatorGroup selects
// an install mode the CSV supports, in the Subscription's namespace.
func TestInstallResolvesInTheCatalog(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	const image = "registry.example.com/memcached-operator-catalog@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objects, err := Install(b, image)
	if err != nil {
		t.Fatal(err)
	}
	source := objects[0].(*operatorsv1alpha1.CatalogSource)
	group := objects[2].(*operatorsv1.OperatorGroup)
	sub := objects[3].(*operatorsv1alpha1.Subscription)
	if source.Spec.Image != image {
		t.Errorf("the CatalogSource serves %s, want %s", source.Spec.Image, image)
	}
	if sub.Spec.CatalogSource != source.Name || sub.Spec.CatalogSourceNamespace != source.Namespace {
		t.Errorf("the Subscription's source is %s/%s, want the CatalogSource %s/%s", sub.Spec.CatalogSourceNamespace, sub.Spec.CatalogSource, source.Namespace, source.Name)
	}
	if group.Namespace != sub.Namespace || len(group.Spec.TargetNamespaces) != 0 || group.Spec.Selector != nil {
		t.Errorf("the OperatorGroup %s/%s (targets %v) is not an AllNamespaces group in the Subscription's namespace %s", group.Namespace, group.Name, group.Spec.TargetNamespaces, sub.Namespace)
	}

	catalog, err := loadCatalog(filepath.Join(root, CatalogDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(catalog.Packages) != 1 || catalog.Packages[0].Name != sub.Spec.Package {
		t.Fatalf("the catalog's packages are %v, want the Subscription's %s", catalog.Packages, sub.Spec.Package)
	}
	if catalog.Packages[0].DefaultChannel != sub.Spec.Channel {
		t.Errorf("the Subscription follows channel %s, the catalog's default is %s", sub.Spec.Channel, catalog.Packages[0].DefaultChannel)
	}
	var entries []string
	for _, ch := range catalog.Channels {
		if ch.Name == sub.Spec.Channel {
			for _, e := range ch.Entries {
				entries = append(entries, e.Name)
			}
		}
	}
	if !slices.Contains(entries, sub.Spec.StartingCSV) {
		t.Errorf("the Subscription starts at %s, which channel %s does not hold (%v)", sub.Spec.StartingCSV, sub.Spec.Channel, entries)
	}

	// A CSV that cannot run in every namespace is refused, not subscribed.
	b.CSV.Spec.InstallModes = slices.DeleteFunc(slices.Clone(b.CSV.Spec.InstallModes), func(m operatorsv1alpha1.InstallMode) bool {
		return m.Type == operatorsv1alpha1.InstallModeTypeAllNamespaces
	})
	if _, err := Install(b, image); err == nil || !strings.Contains(err.Error(), "AllNamespaces") {
		t.Errorf("Install of a CSV without AllNamespaces: %v, want an error naming the install mode", err)
	}
}
