// Package chart generates the operator's Helm chart from the kustomize
// output of deploy/base, as kubebuilder's helm/v2-alpha plugin does, so
// that the chart and the kustomize install cannot drift: with default
// values the chart renders the same objects, field for field, except the
// labels Helm charts add by convention (HelmLabels) and Helm's own annotations (HelmAnnotations), the Namespace (Helm
// installs into the namespace it is given) and the uninstall hook.
//
// The knobs of values.yaml are the ones users of an operator chart expect
// (image, replicas, leader election, resources, log level, watched
// namespaces, metrics and a ServiceMonitor, scheduling, security contexts,
// network policies, CRD install and keep); each is defined once in
// values.go, from which values.yaml and values.schema.json are written.
package chart

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/hack/internal/imageref"
	"github.com/example/memcached-operator/hack/internal/kustomize"
)

// Name is the chart's name; Dir is where `make helm-chart` writes it. It
// lives in deploy/ beside the kustomize install it is generated from, and
// is committed, so that Argo CD and Flux can install it from Git as well
// as from the OCI registry it is pushed to.
const (
	Name = "memcached-operator"
	Dir  = "deploy/helm/" + Name
)

// HelmLabels are the labels the chart adds to every object, by Helm's
// convention; the kustomize install does not have them.
var HelmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// HelmAnnotations are the annotations the chart adds for Helm itself:
// helm.sh/resource-policy (keep) on the CRD, with crds.keep.
var HelmAnnotations = []string{"helm.sh/resource-policy"}

// The objects of the kustomize output the chart templates by name.
const (
	managerDeployment = "memcached-operator-controller-manager"
	metricsService    = "memcached-operator-controller-manager-metrics-service"
	metricsPolicy     = "memcached-operator-allow-metrics-traffic"
)

//go:embed files/_helpers.tpl files/NOTES.txt
var files embed.FS

// Generate builds the chart from the repository at root: deploy/base (the
// install), deploy/prometheus (the optional ServiceMonitor, PodMonitor and
// alerts) and the CA of deploy/components/cert-manager (optional).
func Generate(root string) (*chartv2.Chart, error) {
	base, err := kustomize.Build(filepath.Join(root, "deploy", "base"))
	if err != nil {
		return nil, err
	}
	monitoring, err := kustomize.Build(filepath.Join(root, "deploy", "prometheus"))
	if err != nil {
		return nil, err
	}
	// The alerts are a kustomize component, which only an including
	// kustomization builds: read its objects as they are.
	alerts, err := kustomize.Read(filepath.Join(root, "deploy", "prometheus", "alerts", "rules.yaml"))
	if err != nil {
		return nil, err
	}
	monitoring = append(monitoring, alerts...)
	// The caches' CA from the cert-manager component, for the
	// certManager.caIssuer knob: read as it is, like the alerts.
	issuers, err := kustomize.Read(filepath.Join(root, "deploy", "components", "cert-manager", "issuers.yaml"))
	if err != nil {
		return nil, err
	}
	deployment, err := kustomize.Find(base, "Deployment", managerDeployment)
	if err != nil {
		return nil, err
	}
	image, err := deployment.Pipe(yaml.Lookup("spec", "template", "spec", "containers", "[name=manager]", "image"))
	if err != nil || image == nil {
		return nil, fmt.Errorf("the manager Deployment has no manager container image")
	}
	repository, tag, ok := imageref.SplitTag(image.YNode().Value)
	if !ok || strings.Contains(tag, "@") {
		return nil, fmt.Errorf("the base's manager image %s must be repository:tag, the release's version", image.YNode().Value)
	}
	values, err := valuesOf(deployment, repository)
	if err != nil {
		return nil, err
	}

	c := &chartv2.Chart{Metadata: metadata(tag), Values: values.defaults().(map[string]any)}
	for _, o := range slices.Concat(base, monitoring, issuers) {
		if o.GetKind() == "Namespace" {
			continue
		}
		name, text, err := template(o)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		c.Templates = append(c.Templates, &common.File{Name: name, Data: []byte(generatedHeader + text)})
	}
	hook, err := uninstallHook()
	if err != nil {
		return nil, err
	}
	c.Templates = append(c.Templates, &common.File{Name: "templates/uninstall/delete-memcacheds.yaml", Data: append([]byte(generatedHeader), hook...)})
	for _, f := range []string{"_helpers.tpl", "NOTES.txt"} {
		data, err := files.ReadFile("files/" + f)
		if err != nil {
			return nil, err
		}
		c.Templates = append(c.Templates, &common.File{Name: "templates/" + f, Data: data})
	}
	sort.Slice(c.Templates, func(i, j int) bool { return c.Templates[i].Name < c.Templates[j].Name })

	if c.Schema, err = schemaJSON(values); err != nil {
		return nil, err
	}
	raw, err := valuesYAML(values, "Values of the memcached-operator chart. Generated by `make helm-chart`\n(hack/chart) from deploy/: do not edit. values.schema.json checks them.")
	if err != nil {
		return nil, err
	}
	c.Raw = []*common.File{{Name: chartutil.ValuesfileName, Data: raw}}
	return c, c.Validate()
}

// generatedHeader opens every YAML file of the chart. values.schema.json
// has none (JSON has no comments), nor NOTES.txt, which Helm prints to the
// user after an install.
const generatedHeader = "# Generated by `make helm-chart` (hack/chart) from deploy/: do not edit.\n"

// Write replaces the chart directory dir (…/memcached-operator) with c.
func Write(c *chartv2.Chart, dir string) error {
	if filepath.Base(dir) != c.Name() {
		return fmt.Errorf("%s: a chart's directory is named after the chart, %s", dir, c.Name())
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := chartutil.SaveDir(c, filepath.Dir(dir)); err != nil {
		return err
	}
	// Helm writes Chart.yaml from the metadata, with no room for a comment.
	path := filepath.Join(dir, chartutil.ChartfileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(generatedHeader), raw...), 0o644)
}

// metadata is Chart.yaml: the chart's version is the release's, without
// the v (SemVer, as Helm and OCI tags want); appVersion is the image tag.
func metadata(tag string) *chartv2.Metadata {
	return &chartv2.Metadata{
		APIVersion:  chartv2.APIVersionV2,
		Name:        Name,
		Version:     strings.TrimPrefix(tag, "v"),
		AppVersion:  tag,
		KubeVersion: ">=1.29.0-0",
		Type:        "application",
		Description: "A Kubernetes operator for memcached: Memcached objects become memcached Deployments, Services and PodDisruptionBudgets, with status, rollouts and an optional exporter.",
		Home:        "https://github.com/example/memcached-operator",
		Sources:     []string{"https://github.com/example/memcached-operator"},
		Icon:        "https://raw.githubusercontent.com/example/memcached-operator/main/docs/icon.svg",
		Keywords:    []string{"memcached", "cache", "operator"},
		Maintainers: []*chartv2.Maintainer{{Name: "memcached-operator maintainers", URL: "https://github.com/example/memcached-operator"}},
	}
}
