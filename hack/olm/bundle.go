// Package olm generates the operator's OLM bundle (registry+v1: a
// ClusterServiceVersion, the CRD and the other manifests, its metadata and
// bundle.Dockerfile) and its file-based catalog from the same kustomize
// output as every other install (deploy/base), as `operator-sdk generate
// bundle` and `opm render` would, and validates them with OLM's own
// libraries (operator-framework/api, operator-registry).
package olm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/hack/internal/imageref"
	"github.com/example/memcached-operator/hack/internal/kustomize"
	yamlout "github.com/example/memcached-operator/hack/internal/manifest"
)

// The package, its one channel, and where the bundle is written.
const (
	Package   = "memcached-operator"
	Channel   = "stable"
	BundleDir = "bundle"
	// MinKubeVersion: the CRD's validation rules (CEL) are GA from 1.29.
	MinKubeVersion = "1.29.0"
)

// Bundle is a generated registry+v1 bundle.
type Bundle struct {
	CSV *operatorsv1alpha1.ClusterServiceVersion
	// Manifests are the other objects of bundle/manifests (the CRD first),
	// by file name.
	Manifests map[string]any
	// Annotations are metadata/annotations.yaml and bundle.Dockerfile's labels.
	Annotations map[string]string
	// ManagerImage is the manager image the install strategy runs.
	ManagerImage string
}

// Image is where the bundle's image is published: beside the manager's
// repository, as operator-sdk's BUNDLE_IMG convention has it
// (<manager repository>-bundle:v<version>).
func (b *Bundle) Image() string {
	repo, _, _ := imageref.SplitTag(b.ManagerImage)
	return repo + "-bundle:v" + b.Version()
}

// Version is the release the bundle is for.
func (b *Bundle) Version() string { return b.CSV.Spec.Version.String() }

// Generate builds the bundle from the repository at root.
func Generate(root string) (*Bundle, error) {
	objects, err := kustomize.Build(filepath.Join(root, "deploy", "base"))
	if err != nil {
		return nil, err
	}
	var (
		crd         apiextensionsv1.CustomResourceDefinition
		deployment  appsv1.Deployment
		roles       = map[string]rbacv1.Role{}
		clusterRole = map[string]rbacv1.ClusterRole{}
		bindings    []rbacv1.RoleBinding
		cbindings   []rbacv1.ClusterRoleBinding
		manifests   = map[string]any{}
	)
	for _, o := range objects {
		var target any
		switch o.GetKind() {
		case "Namespace", "ServiceAccount":
			// OLM installs into the OperatorGroup's namespace and creates
			// the install strategy's ServiceAccount.
			continue
		case "CustomResourceDefinition":
			target = &crd
		case "Deployment":
			target = &deployment
		case "Role":
			var r rbacv1.Role
			if err := decode(o, &r); err != nil {
				return nil, err
			}
			roles[r.Name] = r
			continue
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := decode(o, &r); err != nil {
				return nil, err
			}
			clusterRole[r.Name] = r
			continue
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := decode(o, &b); err != nil {
				return nil, err
			}
			bindings = append(bindings, b)
			continue
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := decode(o, &b); err != nil {
				return nil, err
			}
			cbindings = append(cbindings, b)
			continue
		case "Service", "NetworkPolicy":
			m, err := manifest(o)
			if err != nil {
				return nil, err
			}
			manifests[fileName(o.GetKind(), o.GetName())] = m
			continue
		default:
			return nil, fmt.Errorf("hack/olm does not know how a bundle carries a %s", o.GetKind())
		}
		if err := decode(o, target); err != nil {
			return nil, err
		}
	}
	sa := deployment.Spec.Template.Spec.ServiceAccountName
	strategy := operatorsv1alpha1.StrategyDetailsDeployment{}
	// The roles bound to the manager's ServiceAccount become the CSV's
	// permissions: OLM creates them with the bindings, for the
	// ServiceAccount it creates.
	for _, b := range bindings {
		if !boundTo(b.Subjects, sa) {
			continue
		}
		r, ok := roles[b.RoleRef.Name]
		if !ok {
			return nil, fmt.Errorf("RoleBinding %s binds Role %s, which deploy/base lacks", b.Name, b.RoleRef.Name)
		}
		strategy.Permissions = append(strategy.Permissions, operatorsv1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: r.Rules})
	}
	bound := map[string]bool{}
	for _, b := range cbindings {
		if !boundTo(b.Subjects, sa) {
			continue
		}
		r, ok := clusterRole[b.RoleRef.Name]
		if !ok {
			return nil, fmt.Errorf("ClusterRoleBinding %s binds ClusterRole %s, which deploy/base lacks", b.Name, b.RoleRef.Name)
		}
		bound[r.Name] = true
		strategy.ClusterPermissions = append(strategy.ClusterPermissions, operatorsv1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: r.Rules})
	}
	// ClusterRoles for people (Memcached admin/editor/viewer, metrics
	// reader) ship as objects of the bundle.
	for name, r := range clusterRole {
		if bound[name] {
			continue
		}
		r.TypeMeta = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
		manifests[fileName("ClusterRole", name)] = r
	}

	image := deployment.Spec.Template.Spec.Containers[0].Image
	_, tag, ok := imageref.SplitTag(image)
	if !ok {
		return nil, fmt.Errorf("the base's manager image %s has no tag: the release's version", image)
	}
	v, err := semver.Parse(strings.TrimPrefix(tag, "v"))
	if err != nil {
		return nil, fmt.Errorf("the base's manager image tag %s is not a release version: %w", tag, err)
	}
	watchTargetNamespaces(&deployment)
	strategy.DeploymentSpecs = []operatorsv1alpha1.StrategyDeploymentSpec{{Name: deployment.Name, Spec: deployment.Spec, Label: deployment.Labels}}

	example, err := os.ReadFile(filepath.Join(root, "deploy", "samples", "memcached-sample.yaml"))
	if err != nil {
		return nil, err
	}
	almExamples, err := sigsyaml.YAMLToJSON(example)
	if err != nil {
		return nil, err
	}
	icon, err := os.ReadFile(filepath.Join(root, "docs", "icon.svg"))
	if err != nil {
		return nil, err
	}
	specDescriptors, statusDescriptors := descriptors(&crd)

	csv := &operatorsv1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: Package + ".v" + v.String(),
			Annotations: map[string]string{
				"alm-examples": "[" + string(almExamples) + "]",
				// Level 2 of the capability model: the operator installs
				// memcached and upgrades it (image and configuration
				// changes roll out within the disruption budget). It has
				// no backup and restore (a cache keeps no state worth
				// restoring), so not level 3; metrics and alerts are
				// described in docs/observability.md, not yet auto-pilot.
				"capabilities":   "Seamless Upgrades",
				"categories":     "Database",
				"containerImage": image,
				"description":    "Runs memcached caches from Memcached objects: Deployments, Services and disruption budgets, status and rollouts.",
				"repository":     "https://github.com/example/memcached-operator",
				"support":        "memcached-operator maintainers",
				"operatorframework.io/suggested-namespace": "memcached-operator-system",
				"operators.operatorframework.io/builder":   "hack/olm (make bundle)",
			},
			Labels: map[string]string{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/arch.arm64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
		},
		Spec: operatorsv1alpha1.ClusterServiceVersionSpec{
			DisplayName:    "Memcached Operator",
			Description:    description,
			Version:        version.OperatorVersion{Version: v},
			Maturity:       "alpha",
			MinKubeVersion: MinKubeVersion,
			Keywords:       []string{"memcached", "cache", "key-value"},
			Maintainers:    []operatorsv1alpha1.Maintainer{{Name: "memcached-operator maintainers", Email: "memcached-operator@example.com"}},
			Provider:       operatorsv1alpha1.AppLink{Name: "memcached-operator maintainers", URL: "https://github.com/example/memcached-operator"},
			Links: []operatorsv1alpha1.AppLink{
				{Name: "Source", URL: "https://github.com/example/memcached-operator"},
				{Name: "Memcached", URL: "https://memcached.org"},
			},
			Icon: []operatorsv1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString(icon), MediaType: "image/svg+xml"}},
			InstallModes: []operatorsv1alpha1.InstallMode{
				{Type: operatorsv1alpha1.InstallModeTypeOwnNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeSingleNamespace, Supported: true},
				// OLM discourages MultiNamespace OperatorGroups.
				{Type: operatorsv1alpha1.InstallModeTypeMultiNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			InstallStrategy: operatorsv1alpha1.NamedInstallStrategy{StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment, StrategySpec: strategy},
			CustomResourceDefinitions: operatorsv1alpha1.CustomResourceDefinitions{Owned: []operatorsv1alpha1.CRDDescription{{
				Name: crd.Name, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.Kind,
				DisplayName: "Memcached", Description: "A memcached cache: its size, memory, connections, placement and monitoring.",
				Resources: []operatorsv1alpha1.APIResourceReference{
					{Name: "", Kind: "Deployment", Version: "v1"},
					{Name: "", Kind: "Service", Version: "v1"},
					{Name: "", Kind: "PodDisruptionBudget", Version: "v1"},
					// The events the manager records about each instance
					// (events.k8s.io/v1). Listing them also tells the
					// removed-APIs validator that the manager's
					// events.k8s.io permission is for this version, not
					// the v1beta1 API removed in 1.25.
					{Name: "", Kind: "Event", Version: "v1"},
				},
				SpecDescriptors: specDescriptors, StatusDescriptors: statusDescriptors,
			}}},
		},
	}
	crd.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	manifests[crd.Name+".crd.yaml"] = crd

	return &Bundle{CSV: csv, Manifests: manifests, ManagerImage: image, Annotations: map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         Package,
		"operators.operatorframework.io.bundle.channels.v1":        Channel,
		"operators.operatorframework.io.bundle.channel.default.v1": Channel,
	}}, nil
}

const description = `The memcached operator runs memcached caches on Kubernetes. Each Memcached
object becomes a Deployment of memcached pods, a Service to reach them and a
PodDisruptionBudget, which the operator keeps as the object says.

* **Size and configuration**: replicas, memory, connections, threads, item
  size and extra memcached flags, validated before they are accepted.
* **Rollouts** that respect the disruption budget, and status conditions
  (Available, Progressing, Degraded, Stalled) that tell what is happening.
* **Placement**: anti-affinity, topology spread, node selectors, tolerations.
* **Monitoring**: an optional memcached_exporter sidecar.

Create a cache:

` + "```yaml" + `
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: memcached-sample
spec:
  size: 3
` + "```\n"

// watchTargetNamespaces gives the manager the namespaces of its
// OperatorGroup: OLM annotates the pod template with olm.targetNamespaces
// (empty for AllNamespaces), which the manager reads as WATCH_NAMESPACES.
func watchTargetNamespaces(d *appsv1.Deployment) {
	c := &d.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "WATCH_NAMESPACES", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['olm.targetNamespaces']"},
	}})
}

func boundTo(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa {
			return true
		}
	}
	return false
}

func decode(o *yaml.RNode, into any) error {
	raw, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// manifest is an object as kustomize wrote it, without the namespace OLM
// replaces with the OperatorGroup's.
func manifest(o *yaml.RNode) (map[string]any, error) {
	var m map[string]any
	if err := decode(o, &m); err != nil {
		return nil, err
	}
	delete(m["metadata"].(map[string]any), "namespace")
	return m, nil
}

func fileName(kind, name string) string {
	return strings.TrimPrefix(name, Package+"-") + "_" + strings.ToLower(kind) + ".yaml"
}

// Write writes the bundle into dir (bundle/) and its Dockerfile beside
// it, replacing what was there.
func (b *Bundle) Write(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, sub := range []string{"manifests", "metadata"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	files := map[string]any{Package + ".clusterserviceversion.yaml": b.CSV}
	for name, m := range b.Manifests {
		files[name] = m
	}
	for name, o := range files {
		if err := writeYAML(filepath.Join(dir, "manifests", name), o); err != nil {
			return err
		}
	}
	if err := writeYAML(filepath.Join(dir, "metadata", "annotations.yaml"), map[string]any{"annotations": b.Annotations}); err != nil {
		return err
	}
	keys := make([]string, 0, len(b.Annotations))
	for k := range b.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var df strings.Builder
	df.WriteString("# The bundle image of " + Package + " " + b.Version() + ", for OLM. Generated by `make bundle`\n")
	df.WriteString("# (hack/olm): do not edit. `make olm-publish` builds and pushes it without Docker.\nFROM scratch\n\n")
	for _, k := range keys {
		fmt.Fprintf(&df, "LABEL %s=%s\n", k, b.Annotations[k])
	}
	base := filepath.Base(dir)
	df.WriteString("\nCOPY " + base + "/manifests /manifests/\nCOPY " + base + "/metadata /metadata/\n")
	return os.WriteFile(filepath.Join(filepath.Dir(dir), "bundle.Dockerfile"), []byte(df.String()), 0o644)
}

func writeYAML(path string, o any) error {
	n, err := yamlout.Node(o, []string{"spec", "install", "spec", "deployments", "[name=memcached-operator-controller-manager]", "spec", "template", "metadata"})
	if err != nil {
		return err
	}
	s, err := n.String()
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(bundleHeader+s), 0o644)
}

// bundleHeader opens every file of the bundle.
const bundleHeader = "# Generated by `make bundle` (hack/olm) from deploy/: do not edit.\n"
