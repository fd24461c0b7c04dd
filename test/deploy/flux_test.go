package deploy

import (
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/helmtemplate"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The Flux objects in deploy/flux are valid against Flux's own CRDs (the
// ones the controllers in bin/ ship, bin/flux-crds), accepted by a
// server-side dry run. test/e2e then runs them with the real controllers.
func TestFluxObjectsAreValid(t *testing.T) {
	bins, err := repo.Bin("kubectl", "flux-crds")
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartEnvtest(t)
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", bins["flux-crds"])
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--all", "crd", "--timeout=60s")
	cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "create", "namespace", "flux-system")
	for _, dir := range append(envDirs(), "deploy/flux/helm") {
		out := cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "--dry-run=server", "-k", dir)
		t.Logf("%s: %s", dir, out)
	}
}

func envDirs() []string {
	var dirs []string
	for _, env := range envs {
		dirs = append(dirs, "deploy/flux/clusters/"+env)
	}
	return dirs
}

// The HelmRelease deploys the repository's chart: its OCIRepository pulls
// the chart's version, and its values pass the chart's schema and
// templates as helm-controller renders them (release name, target
// namespace).
func TestFluxHelmRelease(t *testing.T) {
	r := render(t, "deploy/flux/helm")
	c := helmtemplate.Load(t, helmtemplate.Dir(t))
	if tag := r.get(t, "OCIRepository/memcached-operator-chart", "spec", "ref", "tag"); tag != c.Metadata.Version {
		t.Errorf("the OCIRepository pulls chart version %q, the repository's is %s", tag, c.Metadata.Version)
	}
	if url := r.get(t, "OCIRepository/memcached-operator-chart", "spec", "url"); !strings.HasSuffix(url, "/"+c.Metadata.Name) {
		t.Errorf("the OCIRepository pulls %s, not chart %s", url, c.Metadata.Name)
	}
	hr := r["HelmRelease/memcached-operator"]
	var spec struct {
		Spec struct {
			ReleaseName     string         `json:"releaseName"`
			TargetNamespace string         `json:"targetNamespace"`
			Values          map[string]any `json:"values"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal([]byte(hr.MustString()), &spec); err != nil {
		t.Fatal(err)
	}
	if _, err := helmtemplate.Template(c, spec.Spec.ReleaseName, spec.Spec.TargetNamespace, spec.Spec.Values); err != nil {
		t.Errorf("the HelmRelease's values do not render: %v", err)
	}
}

// The layout Flux users rely on: each cluster directory includes
// flux-system, whose Kustomization syncs that very directory (Flux manages
// itself); CRDs, operator and instances are separate Kustomizations chained
// with dependsOn; dev follows main while staging and prod follow release
// tags; and nothing a prune could delete along with every cache (the CRD,
// the namespaces) is prunable.
func TestFluxLayout(t *testing.T) {
	wantRef := map[string]string{"dev": "branch=main", "staging": "semver=>=0.1.0-0", "prod": "tag=v0.1.0"}
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			r := render(t, "deploy/flux/clusters/"+env)
			get := func(id string, path ...string) string { return r.get(t, id, path...) }
			if p := get("Kustomization/flux-system", "spec", "path"); p != "./deploy/flux/clusters/"+env {
				t.Errorf("flux-system syncs %q, want its own directory", p)
			}
			for ks, dep := range map[string]string{"memcached-operator": "memcached-crds", "memcached-instances": "memcached-operator"} {
				if d := get("Kustomization/"+ks, "spec", "dependsOn", "[name="+dep+"]", "name"); d != dep {
					t.Errorf("%s does not depend on %s", ks, dep)
				}
			}
			paths := map[string]string{
				"memcached-crds":      "./deploy/crd",
				"memcached-operator":  "./overlays/" + env + "/operator",
				"memcached-instances": "./overlays/" + env + "/instances",
			}
			for ks, want := range paths {
				if p := get("Kustomization/"+ks, "spec", "path"); p != want {
					t.Errorf("%s builds %q, want %q", ks, p, want)
				}
				if get("Kustomization/"+ks, "spec", "wait") != "true" || get("Kustomization/"+ks, "spec", "prune") != "true" {
					t.Errorf("%s must wait for health and prune what leaves Git", ks)
				}
			}
			ref := ""
			for _, k := range []string{"branch", "semver", "tag"} {
				if v := get("GitRepository/memcached-operator", "spec", "ref", k); v != "" {
					ref = k + "=" + v
				}
			}
			if ref != wantRef[env] {
				t.Errorf("the source follows %s, want %s", ref, wantRef[env])
			}
			for _, o := range renderList(t, "overlays/"+env) {
				if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				if v := o.GetAnnotations()["kustomize.toolkit.fluxcd.io/prune"]; v != "disabled" {
					t.Errorf("%s %s: kustomize.toolkit.fluxcd.io/prune is %q, want disabled", o.GetKind(), o.GetName(), v)
				}
			}
		})
	}
}
