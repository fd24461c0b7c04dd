package ship

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	"github.com/example/memcached-operator/hack/image"
	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/gitserver"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// A release, end to end, through a real registry, as a fork that ships to
// its own registry runs it: `make docker-build docker-push IMG=...` pushes
// images whose index is pulled back and inspected, `make retarget` points every overlay's images
// at the registry, `make release ... TAG=1` builds and pushes both images,
// pins staging by tag@digest and commits and tags that pin, `make promote` carries them to prod resolving
// every digest from the registry (and refuses a digest the registry does
// not serve for the tag), `make pin RESOLVE=1` pins memcached by digest.
// Every artifact is signed as it is pushed and `make verify-release` checks
// each signature and attestation; promote and pin refuse unsigned digests.
// Every image the prod overlay renders then resolves in the registry to its
// pinned digest, and a rebuild of the commit gives the same digests.
//
// The registry is a user's cluster's: its real nodes pull from it, at the
// cluster's own private address, and import nothing but the cluster's own
// images. Prod, applied as the kubectl guide applies it, runs there: each
// of its images (the manager, the reloader in it, memcached and the
// exporter) is pulled by the kubelets by its pinned digest, and the
// secured cache turns Ready. Flux's source-controller there accepts the
// signed chart and refuses unsigned ones.
//
// Upstream registries are out of reach here, so memcached and the exporter
// are the project's own images (Debian's memcached, the exporter built from
// the module proxy), pushed under the names the retargeted overlays use, as
// a mirror would hold the public ones.
func TestReleaseThroughARealRegistry(t *testing.T) {
	bins, err := repo.Bin("kubectl", "kustomize", "manager")
	if err != nil {
		t.Fatal(err)
	}
	k := cluster.StartRealPulling(t, "release", 3)
	k.DumpOnFailure(t)
	c := k.Client(t)
	t.Logf("3 real nodes that pull from %s Ready in %v", k.Registry(), k.Started.Round(time.Millisecond))
	reg := registry.StartAt(t, k.Registry())
	work := checkout(t)
	for ref, component := range map[string]string{reg.Host + "/memcached:1.6.39-alpine": "memcached", reg.Host + "/memcached-exporter:v0.14.4": "memcached-exporter"} {
		pushLocalImage(t, ref, component)
	}

	// The seed's step 6, as written there: IMG, then docker-build docker-push.
	out := makeIn(t, work, "docker-build", "docker-push", "IMG="+reg.Host+"/memcached-operator:dev")
	// The version label is the Makefile's VERSION, git describe.
	described, err := exec.Command("git", "-C", work, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"manager", "set-image-replicas"} {
		c := image.Components[component]
		checkIndex(t, c, metadata(t, work, strings.TrimSpace(string(described))), pull(t, reg.Host+"/"+c.Title+":dev"))
	}
	t.Logf("make docker-build docker-push:\n%s", lastLines(out, 2))

	makeIn(t, work, "retarget", "REGISTRY="+reg.Host)
	// The release key: make keygen's dev pair in the checkout's .work/,
	// which the Makefile's COSIGN_KEY and COSIGN_PUBLIC_KEY name.
	makeIn(t, work, "keygen")
	start := time.Now()
	out = makeIn(t, work, "release", "VERSION=v0.2.0", "REGISTRY="+reg.Host, "ENV=staging", "TAG=1")
	t.Logf("make release in %v:\n%s", time.Since(start).Round(100*time.Millisecond), lastLines(out, 3))
	// The rest of the release: the chart and the OLM bundle and catalog,
	// each signed as it is pushed; then every artifact verified.
	makeIn(t, work, "helm-push", "VERSION=v0.2.0", "REGISTRY="+reg.Host)
	makeIn(t, work, "olm-publish", "VERSION=v0.2.0", "REGISTRY="+reg.Host)
	builtFrom, err := exec.Command("git", "-C", work, "rev-parse", "v0.2.0~1").Output()
	if err != nil {
		t.Fatal(err)
	}
	verified := checkVerifyRelease(t, work, reg.Host, strings.TrimSpace(string(builtFrom)))
	t.Logf("make verify-release:\n%s", verified)
	managerDigest := digest(t, reg.Host+"/memcached-operator:v0.2.0")
	managerRef := reg.Host + "/memcached-operator:v0.2.0@" + managerDigest
	// TAG=1: the tag staging and prod follow exists, on a commit that pins
	// staging to what was pushed, and holds nothing else of the working tree.
	if tagged, err := exec.Command("git", "-C", work, "show", "v0.2.0:overlays/staging/images.yaml").Output(); err != nil || !strings.Contains(string(tagged), managerDigest) {
		t.Errorf("tag v0.2.0's overlays/staging/images.yaml does not pin %s (%v):\n%s", managerRef, err, tagged)
	}
	if changed, err := exec.Command("git", "-C", work, "diff", "--name-only", "v0.2.0~1", "v0.2.0").Output(); err != nil || slices.ContainsFunc(strings.Fields(string(changed)), func(f string) bool { return !strings.HasPrefix(f, "overlays/staging/") }) {
		t.Errorf("the release commit changes more than overlays/staging (%v):\n%s", err, changed)
	}
	if install := run.ReadFile(t, filepath.Join(work, "dist", "install.yaml")); !strings.Contains(install, "image: "+managerRef) {
		t.Errorf("dist/install.yaml does not run %s", managerRef)
	}

	// A digest the registry does not serve for its tag is refused.
	staging := filepath.Join(work, "overlays", "staging", "images.yaml")
	good := run.ReadFile(t, staging)
	other := digest(t, reg.Host+"/set-image-replicas:v0.2.0")
	if err := os.WriteFile(staging, []byte(strings.Replace(good, managerDigest, other, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	prodBefore := run.ReadFile(t, filepath.Join(work, "overlays", "prod", "images.yaml"))
	if out, err := tryMake(work, "promote", "FROM=staging", "TO=prod"); err == nil || !strings.Contains(out, "but the registry serves "+managerDigest) {
		t.Errorf("promote accepted a digest the registry does not serve for the tag (%v):\n%s", err, out)
	}
	if run.ReadFile(t, filepath.Join(work, "overlays", "prod", "images.yaml")) != prodBefore {
		t.Errorf("a refused promotion changed prod")
	}
	if err := os.WriteFile(staging, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}

	unsignedRef, foreignRef := refuseUnsigned(t, work, reg.Host, staging, good, managerDigest)

	makeIn(t, work, "promote", "FROM=staging", "TO=prod")
	// How a user pins memcached by digest from their registry or mirror.
	makeIn(t, work, "pin", "ENV=dev", "IMAGE="+reg.Host+"/memcached:1.6.39-alpine", "RESOLVE=1")
	memcachedRef := reg.Host + "/memcached:1.6.39-alpine@" + digest(t, reg.Host+"/memcached:1.6.39-alpine")
	if dev := run.ReadFile(t, filepath.Join(work, "overlays", "dev", "instances", "kustomization.yaml")); !strings.Contains(dev, "  digest: "+strings.SplitN(memcachedRef, "@", 2)[1]) {
		t.Errorf("make pin RESOLVE=1 did not pin dev's memcached to %s:\n%s", memcachedRef, dev)
	}

	// Every image prod runs is pinned by digest, and the registry serves
	// that digest for that tag.
	stdout, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(work, "overlays", "prod"))
	if code != 0 {
		t.Fatal(stderr)
	}
	images := renderedImages(t, stdout)
	if len(images) < 3 {
		t.Fatalf("prod renders only %v", images)
	}
	for _, ref := range images {
		named, err := name.NewDigest(ref, name.Insecure)
		if err != nil {
			t.Errorf("prod runs %s, not pinned by digest: %v", ref, err)
			continue
		}
		tag := strings.TrimSuffix(strings.SplitN(ref, "@", 2)[0], "")
		if served := digest(t, tag); served != named.DigestStr() {
			t.Errorf("prod pins %s, but the registry serves %s for the tag", ref, served)
		}
	}
	t.Logf("prod pins, all served by the registry: %v", images)

	// The same commit, built again, gives the same digests: the one the
	// release was built from, the parent of the commit TAG=1 made.
	built := t.TempDir()
	if out, err := exec.Command("git", "-C", work, "worktree", "add", "--detach", built, "v0.2.0~1").CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	rebuilt := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command(filepath.Join(work, "bin", "image"), "build", "--repo", built, "--component", "manager", "--version", "v0.2.0", "--out", rebuilt)
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != managerDigest {
		t.Errorf("a rebuild of the release gives %s (%v), the registry holds %s", out, err, managerDigest)
	}

	// The user's cluster runs prod, pulling every image by its digest.
	// prod's platform: cert-manager and the password Secret.
	platform.Prepare(t, k.Kubeconfig)
	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-k", filepath.Join(work, "deploy", "install"))
	cluster.Run(t, k.Kubeconfig, []byte(stdout), bins["kubectl"], "apply", "--server-side", "-f", "-")
	certmanager.Start(t, k.Kubeconfig)
	cluster.Eventually(t, 3*time.Minute, "the manager Deployment on the released digest", func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: names.OperatorNamespace, Name: names.ManagerDeployment}, d); err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != managerRef {
			return fmt.Errorf("image %s, want %s", img, managerRef)
		}
		if d.Status.AvailableReplicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %d available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
		return nil
	})
	cluster.WaitMemcachedReady(t, c, names.CacheNamespace, "app-cache", 3)
	checkPulledByDigest(t, c, images)

	// Flux's source-controller takes the signed chart and refuses others;
	// Kyverno's policy admits the signed manager and refuses others.
	checkFluxVerifiesTheChart(t, k, work, reg.Host, "0.2.0")
	checkKyvernoVerifiesTheImages(t, k, work, managerRef, unsignedRef, foreignRef, reg.Host+"/memcached:1.6.39-alpine")
}

// checkout is the working tree as a repository of its own, with the tools
// of bin/ linked in; the binaries `make build` writes are built inside it,
// so that tests running meanwhile keep theirs.
func checkout(t *testing.T) string {
	t.Helper()
	work := gitserver.Snapshot(t, repo.MustRoot(t))
	binDir, err := repo.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "manager", "set-image-replicas", "image":
			continue
		}
		if err := os.Symlink(filepath.Join(binDir, e.Name()), filepath.Join(work, "bin", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

func tryMake(dir string, args ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", dir}, args...)...)
	cmd.Env = append(run.UserEnv(), "KUBEBUILDER_ASSETS=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func makeIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tryMake(dir, args...)
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// pushRandomImage pushes an image of random bytes: one no release built
// or signed.
func pushRandomImage(t *testing.T, ref string) {
	t.Helper()
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	push(t, ref, img)
}

// pushLocalImage pushes one of the project's local images
// (image.LocalComponents), built for this machine, as a mirror of the
// public image would hold it.
func pushLocalImage(t *testing.T, ref, component string) {
	t.Helper()
	img, err := buildcluster.BuildLocalImage(context.Background(), repo.MustRoot(t), component)
	if err != nil {
		t.Fatal(err)
	}
	push(t, ref, img)
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := image.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

func digest(t *testing.T, ref string) string {
	t.Helper()
	d, err := image.Digest(ref)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// renderedImages are the images of the rendered objects: containers of
// workloads, and the images of Memcacheds.
func renderedImages(t *testing.T, manifests string) []string {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader([]byte(manifests))}).Read()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes {
		for _, path := range [][]string{
			{"spec", "template", "spec", "containers"},
			{"spec"},
			{"spec", "monitoring", "exporter"},
		} {
			v, _ := n.Pipe(yaml.Lookup(path...))
			if v == nil {
				continue
			}
			if v.YNode().Kind == yaml.SequenceNode {
				els, _ := v.Elements()
				for _, e := range els {
					if img, _ := e.Pipe(yaml.Lookup("image")); img != nil {
						out = append(out, img.YNode().Value)
					}
				}
				continue
			}
			if n.GetKind() == "Memcached" {
				if img, _ := v.Pipe(yaml.Lookup("image")); img != nil {
					out = append(out, img.YNode().Value)
				}
			}
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkVerifyRelease runs make verify-release and holds its report to the
// release: five artifacts, each signed, the images with their provenance
// and SBOMs, the images built from commit.
func checkVerifyRelease(t *testing.T, work, registry, commit string) string {
	t.Helper()
	out := makeIn(t, work, "verify-release", "VERSION=v0.2.0", "REGISTRY="+registry)
	if n := strings.Count(out, "signature:  verified"); n != 5 {
		t.Errorf("make verify-release verified %d signatures, want 5 (both images, the chart, the bundle and the catalog):\n%s", n, out)
	}
	if n := strings.Count(out, "provenance: verified"); n != 4 {
		t.Errorf("make verify-release verified %d provenance attestations, want 4:\n%s", n, out)
	}
	if n := len(regexp.MustCompile(`(?m)^  sbom linux/[a-z0-9]+: verified$`).FindAllString(out, -1)); n != 4 {
		t.Errorf("make verify-release verified %d SBOM attestations, want 4 (2 images, 2 platforms each):\n%s", n, out)
	}
	for _, image := range []string{"memcached-operator", "set-image-replicas"} {
		want := registry + "/" + image + ":v0.2.0\n  digest:     " + digest(t, registry+"/"+image+":v0.2.0")
		if !strings.Contains(out, want) || !strings.Contains(out, "(built from commit "+commit+")") {
			t.Errorf("make verify-release does not report %s built from %s:\n%s", image, commit, out)
		}
	}
	if strings.Contains(out, "NOT VERIFIED") {
		t.Errorf("make verify-release found unverified artifacts:\n%s", out)
	}
	return lastLines(out, 40)
}

// refuseUnsigned pushes the manager image unsigned, and signed with
// another key, and checks that neither make pin RESOLVE=1 nor make
// promote lets its digest into an overlay. staging holds good, the
// release's pins of managerDigest. It returns both images by digest.
func refuseUnsigned(t *testing.T, work, host, staging, good, managerDigest string) (unsignedRef, foreignRef string) {
	t.Helper()
	otherKey, _ := registry.SigningKey(t)
	unsigned, foreign := host+"/memcached-operator:v0.2.1", host+"/memcached-operator:v0.2.2"
	pushRandomImage(t, unsigned)
	pushRandomImage(t, foreign)
	foreignRef = strings.SplitN(foreign, ":v", 2)[0] + "@" + digest(t, foreign)
	sign := exec.Command(filepath.Join(work, "bin", "image"), "sign", "--ref", foreignRef)
	sign.Env = append(os.Environ(), "COSIGN_KEY="+otherKey)
	if out, err := sign.CombinedOutput(); err != nil {
		t.Fatalf("sign %s with another key: %v\n%s", foreignRef, err, out)
	}
	dev := filepath.Join(work, "overlays", "dev", "images.yaml")
	devBefore := run.ReadFile(t, dev)
	for _, ref := range []string{unsigned, foreign} {
		d := digest(t, ref)
		out, err := tryMake(work, "pin", "ENV=dev", "IMAGE="+ref, "RESOLVE=1")
		if err == nil || !strings.Contains(out, host+"/memcached-operator (digest "+d+") has no signature from") {
			t.Errorf("make pin RESOLVE=1 accepted %s@%s, which the release key did not sign (%v):\n%s", ref, d, err, out)
		}
		if run.ReadFile(t, dev) != devBefore {
			t.Errorf("a refused pin of %s changed dev", ref)
		}
	}
	// staging pinned to the unsigned image: its tag serves that digest, so
	// only the signature check stands between it and prod.
	if err := os.WriteFile(staging, []byte(strings.ReplaceAll(strings.Replace(good, managerDigest, digest(t, unsigned), 1), "v0.2.0", "v0.2.1")), 0o644); err != nil {
		t.Fatal(err)
	}
	prod := filepath.Join(work, "overlays", "prod", "images.yaml")
	prodBefore := run.ReadFile(t, prod)
	if out, err := tryMake(work, "promote", "FROM=staging", "TO=prod"); err == nil || !strings.Contains(out, "refusing to promote an unverified digest to prod") {
		t.Errorf("promote accepted an unsigned digest (%v):\n%s", err, out)
	}
	if run.ReadFile(t, prod) != prodBefore {
		t.Errorf("a refused promotion changed prod")
	}
	if err := os.WriteFile(staging, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(unsigned, ":v", 2)[0] + "@" + digest(t, unsigned), foreignRef
}
