package ship

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/example/memcached-operator/hack/image"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/registry"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The images, pushed to a real registry and pulled back, run with no
// container runtime: the root filesystem is extracted as a runtime would
// and the entrypoint started from it as the image's user. The manager
// reconciles the tutorial's Memcached to Ready on a live apiserver; the
// function pins a ResourceList.
func TestImagesRunFromTheirRootFilesystems(t *testing.T) {
	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.Start(t)
	root := repo.MustRoot(t)
	md := metadata(t, root, "v0.0.0-test")

	refs := map[string]string{}
	for _, component := range []string{"manager", "set-image-replicas"} {
		ref := reg.Host + "/" + image.Components[component].Title + ":v0.0.0-test"
		if _, err := image.Push(buildImage(t, component), ref); err != nil {
			t.Fatal(err)
		}
		idx := pull(t, ref)
		checkIndex(t, image.Components[component], md, idx)
		// The SBOMs are listed as referrers of each platform image.
		m, _ := idx.IndexManifest()
		for _, d := range m.Manifests {
			r, _ := name.ParseReference(reg.Host+"/"+image.Components[component].Title+"@"+d.Digest.String(), name.Insecure)
			referrers, err := remote.Referrers(r.Context().Digest(d.Digest.String()))
			if err != nil {
				t.Fatal(err)
			}
			rm, _ := referrers.IndexManifest()
			if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != image.SBOMMediaType {
				t.Errorf("%s %s: referrers %+v, want one CycloneDX SBOM", component, d.Platform, rm.Manifests)
			}
		}
		refs[component] = ref
	}

	t.Run("manager", func(t *testing.T) {
		fs := extract(t, pull(t, refs["manager"]))
		env := cluster.StartEnvtest(t)
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-k", "deploy/install")
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com")
		kubeconfig := readable(t, cluster.ImpersonatingKubeconfig(t, env.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount))
		mgr := proc.Start(t, proc.Spec{
			Name: "manager (from its image)", Path: filepath.Join(fs, "manager"),
			Args:        []string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0"},
			Dir:         "/",
			Credential:  asImageUser(),
			StopTimeout: 30 * time.Second,
		})
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", "deploy/samples/memcached-sample.yaml")
		cluster.MarkDeploymentReady(t, env.Client, "default", "memcached-sample")
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Ready", "--timeout=60s", "memcached/memcached-sample")
		if out := mgr.Output(); !strings.Contains(out, `"version":"v0.0.0-test"`) {
			t.Errorf("the manager from the image does not report its version:\n%s", out)
		}
	})

	t.Run("set-image-replicas", func(t *testing.T) {
		fs := extract(t, pull(t, refs["set-image-replicas"]))
		cmd := exec.CommandContext(context.Background(), filepath.Join(fs, "usr", "local", "bin", "set-image-replicas"))
		cmd.Env, cmd.Dir = []string{}, "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asImageUser()}
		cmd.Stdin = strings.NewReader(`apiVersion: config.kubernetes.io/v1
kind: ResourceList
functionConfig: {apiVersion: fn.cache.example.com/v1alpha1, kind: SetImageReplicas, images: [{name: memcached, newTag: "1.6.39"}]}
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: m, image: memcached}]}}
`)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "memcached:1.6.39") {
			t.Errorf("the function from its image: %v\n%s", err, out)
		}
	})
}

// asImageUser is the image's user when the tests run as root; otherwise the
// current user, already unprivileged.
func asImageUser() *syscall.Credential {
	if os.Getuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: image.UID, Gid: image.UID}
}

// readable copies a file where the image's user can read it.
func readable(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubeconfig-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kubeconfig")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
