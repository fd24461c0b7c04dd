package pin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// plan collects the edits one run makes, and the results that explain them.
type plan struct {
	cfg       *v1alpha1.SetImageReplicas
	selectors []labels.Selector // parsed replicas[i].labelSelector

	edits   []edit
	results framework.Results
	// matched records which rules matched something ("images[0]").
	matched map[string]bool
	// replicaOwner records which rule set a workload's count, to catch two
	// rules fighting over one workload.
	replicaOwner map[string]int
	// pending holds kustomization entries rules would add; see addNewEntries.
	pending []pendingEntry
}

// edit is one change to a YAML node, applied only if the whole plan succeeds.
type edit struct {
	apply func() error
}

func newPlan(cfg *v1alpha1.SetImageReplicas) *plan {
	p := &plan{cfg: cfg, matched: map[string]bool{}, replicaOwner: map[string]int{}}
	for _, r := range cfg.Replicas {
		sel := labels.Everything()
		if r.LabelSelector != "" {
			sel, _ = labels.Parse(r.LabelSelector) // validated by Validate
		}
		p.selectors = append(p.selectors, sel)
	}
	return p
}

func (p *plan) failed() bool {
	for _, r := range p.results {
		if r.Severity == framework.Error {
			return true
		}
	}
	return false
}

// build plans the edits for every item, then reports rules that matched
// nothing.
func (p *plan) build(items []*yaml.RNode) {
	objs := make([]*object, 0, len(items))
	for _, item := range items {
		o, err := newObject(item)
		if err != nil {
			p.errorf(nil, "input item is not a Kubernetes object: %v", err)
			continue
		}
		objs = append(objs, o)
	}
	autoscalers := indexAutoscalers(objs)
	patches := kustomizationPatches(objs)
	for _, o := range objs {
		if o.isKustomization() {
			p.planKustomization(o)
			continue
		}
		if patches[o.path()] {
			// A kustomize patch is a fragment, not a resource: pinning
			// it would add fields (spec.replicas) the patch never meant
			// to set. The kustomization's own pins cover what it patches.
			continue
		}
		if o.isPinFile() {
			p.planPinFile(o)
			continue
		}
		p.planImages(o)
		p.planReplicas(o, autoscalers)
	}
	p.addNewEntries()
	p.reportUnmatched()
}

func (p *plan) reportUnmatched() {
	severity := framework.Warning
	if p.cfg.FailOnEmptyMatch {
		severity = framework.Error
	}
	for i, img := range p.cfg.Images {
		if rule := fmt.Sprintf("images[%d]", i); !p.matched[rule] {
			p.results = append(p.results, &framework.Result{Severity: severity,
				Message: fmt.Sprintf("%s (name %s) matched no image in the input%s", rule, img.Name, p.kustomizationHint())})
		}
	}
	for i, r := range p.cfg.Replicas {
		if rule := fmt.Sprintf("replicas[%d]", i); !p.matched[rule] {
			p.results = append(p.results, &framework.Result{Severity: severity,
				Message: fmt.Sprintf("%s (%s) matched no workload in the input%s", rule, describeSelector(r), p.kustomizationHint())})
		}
	}
}

// kustomizationHint explains an unmatched rule in a package of
// kustomizations, where a new pin is not added under failOnEmptyMatch.
func (p *plan) kustomizationHint() string {
	if len(p.pending) == 0 {
		return ""
	}
	return " and no entry of a kustomization (with failOnEmptyMatch a new pin is not added: check the name, or add the entry to the kustomization by hand)"
}

func describeSelector(r v1alpha1.Replicas) string {
	var parts []string
	for _, kv := range [][2]string{{"kind", r.Kind}, {"name", r.Name}, {"namespace", r.Namespace}, {"labelSelector", r.LabelSelector}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(parts, ", ")
}

func (p *plan) info(o *object, path string, from, to any, format string, args ...any) {
	p.results = append(p.results, &framework.Result{
		Severity:    framework.Info,
		Message:     fmt.Sprintf(format, args...),
		ResourceRef: o.ref(),
		Field:       &framework.Field{Path: path, CurrentValue: from, ProposedValue: to},
		File:        o.file(),
	})
}

func (p *plan) warnf(o *object, format string, args ...any) {
	p.results = append(p.results, &framework.Result{Severity: framework.Warning, Message: fmt.Sprintf(format, args...), ResourceRef: o.ref(), File: o.file()})
}

func (p *plan) errorf(o *object, format string, args ...any) {
	r := &framework.Result{Severity: framework.Error, Message: fmt.Sprintf(format, args...)}
	if o != nil {
		r.ResourceRef, r.File = o.ref(), o.file()
	}
	p.results = append(p.results, r)
}

// object is an input item with its identity read once.
type object struct {
	node      *yaml.RNode
	group     string
	version   string
	kind      string
	name      string
	namespace string
	labels    map[string]string
}

func newObject(node *yaml.RNode) (*object, error) {
	meta, err := node.GetMeta()
	if err != nil {
		return nil, err
	}
	if meta.Kind == "" || meta.APIVersion == "" {
		return nil, fmt.Errorf("missing apiVersion or kind in %q", strings.TrimSpace(node.MustString()))
	}
	group, version := "", meta.APIVersion
	if i := strings.LastIndex(meta.APIVersion, "/"); i >= 0 {
		group, version = meta.APIVersion[:i], meta.APIVersion[i+1:]
	}
	return &object{
		node: node, group: group, version: version, kind: meta.Kind,
		name: meta.Name, namespace: meta.Namespace, labels: meta.Labels,
	}, nil
}

func (o *object) apiVersion() string {
	if o.group == "" {
		return o.version
	}
	return o.group + "/" + o.version
}

func (o *object) id() string {
	if o.namespace == "" {
		return o.kind + " " + o.name
	}
	return o.kind + " " + o.namespace + "/" + o.name
}

func (o *object) ref() *yaml.ResourceIdentifier {
	return &yaml.ResourceIdentifier{
		TypeMeta: yaml.TypeMeta{APIVersion: o.apiVersion(), Kind: o.kind},
		NameMeta: yaml.NameMeta{Name: o.name, Namespace: o.namespace},
	}
}

// path is the file the object was read from ("" outside a package).
func (o *object) path() string {
	path, _, _ := kioutil.GetFileAnnotations(o.node)
	return path
}

func (o *object) file() *framework.File {
	path, index, _ := kioutil.GetFileAnnotations(o.node)
	if path == "" {
		return nil
	}
	f := &framework.File{Path: path}
	_, _ = fmt.Sscanf(index, "%d", &f.Index)
	return f
}

// isPinFile reports whether o is another SetImageReplicas configuration
// (an overlay's images.yaml or replicas.yaml), which the function updates
// instead of treating as a resource.
func (o *object) isPinFile() bool {
	return o.apiVersion() == v1alpha1.APIVersion && o.kind == v1alpha1.Kind
}

func (o *object) isKustomization() bool {
	return o.group == "kustomize.config.k8s.io" && (o.kind == "Kustomization" || o.kind == "Component")
}
