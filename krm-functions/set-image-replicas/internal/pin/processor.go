// Package pin is the set-image-replicas function: it pins container images
// and replica counts in a list of KRM resources.
//
// It works in two phases. The plan phase reads every resource and every rule
// and records the edits it would make, with one result per edit. Only when
// the plan has no error does the apply phase change the YAML nodes in place,
// so comments, key order, quoting and kpt/kustomize annotations survive, and
// a failing run leaves no half-edited resource behind (the processor also
// drops the items from its output).
package pin

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// Processor is the function's framework.ResourceListProcessor.
type Processor struct {
	// Log, when set, receives every result as a line. Standalone runs set it
	// to stderr: their stdout carries only the resources, and the results
	// would otherwise be lost.
	Log io.Writer
}

// Process loads the functionConfig, plans every edit and applies them only
// when nothing failed. On failure rl.Items is emptied, so neither kpt,
// kustomize nor a shell pipeline can pick up a partial result, and the
// returned error (the error results) makes the command exit 1.
func (pr *Processor) Process(rl *framework.ResourceList) error {
	if pr.Log != nil {
		defer func() {
			for _, r := range rl.Results {
				if r.Severity != framework.Error { // errors are the returned error
					_, _ = fmt.Fprintln(pr.Log, r.String())
				}
			}
		}()
	}
	cfg, err := LoadConfig(rl.FunctionConfig)
	if err != nil {
		return fail(rl, errorResults(err))
	}
	p := newPlan(cfg)
	p.build(withoutConfig(rl.Items, rl.FunctionConfig))
	rl.Results = append(rl.Results, p.results...)
	if p.failed() {
		return fail(rl, nil)
	}
	for _, e := range p.edits {
		if err := e.apply(); err != nil {
			// The plan checks every precondition of an edit, so this is a
			// bug; the output is dropped rather than left half-edited.
			return fail(rl, framework.Results{{Severity: framework.Error, Message: "internal error: " + err.Error()}})
		}
	}
	return nil
}

// withoutConfig leaves out the item that is the functionConfig itself: kpt
// sends the file a mutator's configPath names both as functionConfig and
// among the package's items. Matched against itself, every rule would
// "match" its own entry, so a typo would never fail failOnEmptyMatch.
func withoutConfig(items []*yaml.RNode, config *yaml.RNode) []*yaml.RNode {
	if config == nil {
		return items
	}
	path := pathOf(config)
	if path == "" {
		return items
	}
	out := make([]*yaml.RNode, 0, len(items))
	for _, it := range items {
		if pathOf(it) == path &&
			it.GetKind() == config.GetKind() && it.GetName() == config.GetName() {
			continue
		}
		out = append(out, it)
	}
	return out
}

// pathOf is the package path kpt or kustomize recorded for a node, under the
// current annotation or the legacy one (functionConfig keeps the legacy one).
func pathOf(n *yaml.RNode) string {
	a := n.GetAnnotations()
	if p := a[kioutil.PathAnnotation]; p != "" {
		return p
	}
	return a[kioutil.LegacyPathAnnotation] //nolint:staticcheck // kpt still sends functionConfig's path under the legacy key

}

func fail(rl *framework.ResourceList, results framework.Results) error {
	rl.Results = append(rl.Results, results...)
	rl.Items = nil
	var errs framework.Results
	for _, r := range rl.Results {
		if r.Severity == framework.Error {
			errs = append(errs, r)
		}
	}
	return resultsError{errs}
}

// errorResults turns err into one error result per problem, so that each
// invalid field is its own line in kpt's and kustomize's output.
func errorResults(err error) framework.Results {
	var out framework.Results
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, errorResults(e)...)
		}
		return out
	}
	return framework.Results{{Severity: framework.Error, Message: err.Error()}}
}

// resultsError is the error a failed run returns: its error results, one
// per line. kyaml's command prints it as is, so it ends with a newline.
type resultsError struct{ framework.Results }

func (e resultsError) Error() string {
	var b strings.Builder
	for _, r := range e.Results {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// LoadConfig reads the functionConfig: a SetImageReplicas, or a ConfigMap
// with kpt set-image's keys (so the function is a drop-in replacement in a
// Kptfile that used gcr.io/kpt-fn/set-image).
func LoadConfig(node *yaml.RNode) (*v1alpha1.SetImageReplicas, error) {
	if node == nil || node.IsNilOrEmpty() {
		return nil, fmt.Errorf("functionConfig is missing: pass a %s (%s) or a ConfigMap with kpt set-image's keys", v1alpha1.Kind, v1alpha1.APIVersion)
	}
	meta, err := node.GetMeta()
	if err != nil {
		return nil, fmt.Errorf("functionConfig: %w", err)
	}
	var cfg *v1alpha1.SetImageReplicas
	switch {
	case meta.APIVersion == v1alpha1.APIVersion && meta.Kind == v1alpha1.Kind:
		s, err := node.String()
		if err != nil {
			return nil, err
		}
		if cfg, err = v1alpha1.Decode([]byte(s)); err != nil {
			return nil, err
		}
	case meta.APIVersion == "v1" && meta.Kind == "ConfigMap":
		if cfg, err = fromSetImageConfigMap(node); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("functionConfig: %s/%s is not supported; use %s/%s or a v1 ConfigMap with kpt set-image's keys (name, newName, newTag, digest)",
			meta.APIVersion, meta.Kind, v1alpha1.APIVersion, v1alpha1.Kind)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// setImageKeys are the data keys of kpt's set-image ConfigMap.
var setImageKeys = []string{"name", "newName", "newTag", "digest"}

func fromSetImageConfigMap(node *yaml.RNode) (*v1alpha1.SetImageReplicas, error) {
	data := node.GetDataMap()
	var unknown []string
	for k := range data {
		if !contains(setImageKeys, k) {
			unknown = append(unknown, "data."+k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s: unknown key; kpt set-image's ConfigMap allows data.%s", strings.Join(unknown, ", "), strings.Join(setImageKeys, ", data."))
	}
	return &v1alpha1.SetImageReplicas{
		APIVersion: v1alpha1.APIVersion,
		Kind:       v1alpha1.Kind,
		Images: []v1alpha1.Image{{
			Name: data["name"], NewName: data["newName"], NewTag: data["newTag"], Digest: data["digest"],
		}},
	}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
