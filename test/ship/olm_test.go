package ship

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
)

// `make olm-publish` through a real registry: the bundle image carries the
// bundle and its annotations as labels; the catalog image is opm serving
// /configs, whose catalog names the bundle by the digest the registry
// serves, and whose own opm binary validates it; the CatalogSource it
// prints points at the pushed catalog by digest. (OLM itself cannot run
// here: its catalog and bundle-unpack pods need a container runtime.)
func TestOLMPublishThroughARealRegistry(t *testing.T) {
	reg := registry.Start(t)
	work := checkout(t)
	makeIn(t, work, "keygen")
	out := makeIn(t, work, "olm-publish", "VERSION=v0.1.0", "REGISTRY="+reg.Host)
	t.Logf("make olm-publish:\n%s", lastLines(out, 12))

	catalogRef := reg.Host + "/memcached-operator-catalog:v0.1.0"
	if want := "image: " + catalogRef + "@" + digest(t, catalogRef); !strings.Contains(out, want) {
		t.Errorf("the printed CatalogSource lacks %q", want)
	}

	// The bundle image: the committed bundle, labelled as OLM reads it.
	bundleRef := reg.Host + "/memcached-operator-bundle:v0.1.0"
	bundle := pull(t, bundleRef)
	bundleRoot := extract(t, bundle)
	for _, f := range []string{"manifests/memcached-operator.clusterserviceversion.yaml", "metadata/annotations.yaml"} {
		got := readFile(t, filepath.Join(bundleRoot, f))
		if want := readFile(t, filepath.Join(repo.MustRoot(t), "bundle", f)); got != want {
			t.Errorf("the bundle image's /%s differs from bundle/%s", f, f)
		}
	}
	cfg := platformConfig(t, bundle)
	for k, v := range map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.package.v1":   "memcached-operator",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
	} {
		if cfg.Config.Labels[k] != v {
			t.Errorf("bundle label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}

	// The catalog image: opm serving /configs, the bundle pinned by digest.
	catalog := pull(t, catalogRef)
	cfg = platformConfig(t, catalog)
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/bin/opm"}) || len(cfg.Config.Cmd) < 2 || cfg.Config.Cmd[0] != "serve" || cfg.Config.Cmd[1] != "/configs" ||
		cfg.Config.Labels["operators.operatorframework.io.index.configs.v1"] != "/configs" || cfg.Config.User != "65532:65532" {
		t.Errorf("the catalog image runs %q %q as %q, labels %v", cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.User, cfg.Config.Labels)
	}
	catalogRoot := extract(t, catalog)
	fbc := readFile(t, filepath.Join(catalogRoot, "configs", "memcached-operator", "catalog.yaml"))
	pinned := reg.Host + "/memcached-operator-bundle@" + digest(t, bundleRef)
	if !regexp.MustCompile(`(?m)^image: ` + regexp.QuoteMeta(pinned) + `$`).MatchString(fbc) {
		t.Errorf("the catalog does not name the bundle as %s", pinned)
	}
	validate := exec.Command(filepath.Join(catalogRoot, "bin", "opm"), "validate", filepath.Join(catalogRoot, "configs"))
	if b, err := validate.CombinedOutput(); err != nil {
		t.Errorf("the catalog image's opm validate /configs: %v\n%s", err, b)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// platformConfig is the config of the index's image for this machine.
func platformConfig(t *testing.T, idx v1.ImageIndex) *v1.ConfigFile {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			return cf
		}
	}
	t.Fatalf("no image for linux/%s", runtime.GOARCH)
	return nil
}
