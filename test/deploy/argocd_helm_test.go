package deploy

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/argocd"
	"github.com/example/memcached-operator/test/internal/helmtemplate"
)

// helmApplication is what the rules read of deploy/argocd/helm's
// Application: a single Helm source from an OCI registry.
type helmApplication struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Project string `json:"project"`
		Source  struct {
			RepoURL        string `json:"repoURL"`
			Chart          string `json:"chart"`
			TargetRevision string `json:"targetRevision"`
			Helm           struct {
				ReleaseName  string         `json:"releaseName"`
				ValuesObject map[string]any `json:"valuesObject"`
			} `json:"helm"`
		} `json:"source"`
		Destination argocd.Destination `json:"destination"`
	} `json:"spec"`
}

// The Helm-source Application passes Argo CD's project rules on what Argo
// CD would render from it (`helm template` of the chart at targetRevision,
// with its release name, destination namespace and values), the same
// promises as the kustomize Applications hold (waves, CRD never pruned),
// and Argo CD runs none of the chart's hooks, so none runs at sync time.
func TestArgoCDHelmApplication(t *testing.T) {
	objs := render(t, "deploy/argocd/helm")
	projects := appProjects(t, objs)
	node, ok := objs["Application/memcached-operator-helm-dev"]
	if !ok {
		t.Fatal("deploy/argocd/helm renders no Application/memcached-operator-helm-dev")
	}
	var app helmApplication
	if err := sigsyaml.Unmarshal([]byte(node.MustString()), &app); err != nil {
		t.Fatal(err)
	}
	src := app.Spec.Source
	c := helmtemplate.Load(t, helmtemplate.Dir(t))
	if src.Chart != c.Metadata.Name || src.TargetRevision != c.Metadata.Version {
		t.Errorf("the Application deploys chart %s %s, the repository's is %s %s", src.Chart, src.TargetRevision, c.Metadata.Name, c.Metadata.Version)
	}
	repoSecret := objs["Secret/memcached-operator-charts"]
	if repoSecret == nil || scalarOf(repoSecret, "stringData.url") != src.RepoURL || scalarOf(repoSecret, "stringData.enableOCI") != "true" {
		t.Errorf("no repository Secret declares %s as an OCI Helm repository", src.RepoURL)
	}

	check := func(app helmApplication, values map[string]any) []error {
		var errs []error
		proj, ok := projects[app.Spec.Project]
		if !ok {
			return []error{fmt.Errorf("project %q does not exist", app.Spec.Project)}
		}
		dst := app.Spec.Destination
		if err := proj.PermitDestination(app.Spec.Project, dst); err != nil {
			errs = append(errs, err)
		}
		if err := proj.PermitSource(app.Spec.Project, app.Spec.Source.RepoURL); err != nil {
			errs = append(errs, err)
		}
		r, err := helmtemplate.Template(c, app.Spec.Source.Helm.ReleaseName, dst.Namespace, values)
		if err != nil {
			return append(errs, fmt.Errorf("helm template: %w", err))
		}
		manifests := r.Manifest
		for _, h := range r.Hooks {
			manifests += "\n---\n" + h.Manifest
		}
		nodes, err := kio.FromBytes([]byte(manifests))
		if err != nil {
			return append(errs, err)
		}
		var kustomizeApp application
		kustomizeApp.Name = app.Metadata.Name
		for _, o := range nodes {
			id := o.GetKind() + "/" + o.GetName()
			if argocd.IsHook(o.GetAnnotations()) {
				if types := argocd.HookTypes(o.GetAnnotations()); len(types) > 0 {
					errs = append(errs, fmt.Errorf("%s: Argo CD would run this Helm hook at %v", id, types))
				}
				continue
			}
			group, _, found := strings.Cut(o.GetApiVersion(), "/")
			if !found {
				group = ""
			}
			namespace := o.GetNamespace()
			if namespace == "" && isNamespaced(o) {
				namespace = dst.Namespace
			}
			if err := proj.PermitResource(app.Spec.Project, group, o.GetKind(), o.GetName(), namespace, dst); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
			}
			errs = append(errs, checkResource(kustomizeApp, id, o)...)
		}
		return errs
	}
	for _, err := range check(app, app.Spec.Source.Helm.ValuesObject) {
		t.Error(err)
	}
	// With the chart's defaults the pre-delete hook is rendered, and Argo
	// CD still runs none of it.
	if errs := check(app, nil); len(errs) > 0 {
		t.Errorf("with the chart's default values: %v", errs)
	}

	t.Run("mutations are refused", func(t *testing.T) {
		otherRepo := app
		otherRepo.Spec.Source.RepoURL = "registry.evil.example.com/charts"
		if errs := check(otherRepo, nil); len(errs) == 0 {
			t.Error("a chart from an unlisted registry passed")
		}
		otherNamespace := app
		otherNamespace.Spec.Destination.Namespace = "kube-system"
		if errs := check(otherNamespace, nil); len(errs) == 0 {
			t.Error("a release into kube-system passed")
		}
	})
}

// isNamespaced is a small RESTMapper for the kinds the chart renders.
func isNamespaced(o *yaml.RNode) bool {
	switch o.GetKind() {
	case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		return false
	}
	return true
}
