package pin

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// autoscalers maps "namespace/Kind/name" of a scale target to the
// HorizontalPodAutoscaler that scales it.
type autoscalers map[string]*object

func indexAutoscalers(objs []*object) autoscalers {
	out := autoscalers{}
	for _, o := range objs {
		if o.group != "autoscaling" || o.kind != "HorizontalPodAutoscaler" {
			continue
		}
		kind := scalar(o.node, "spec", "scaleTargetRef", "kind")
		name := scalar(o.node, "spec", "scaleTargetRef", "name")
		if kind != "" && name != "" {
			out[o.namespace+"/"+kind+"/"+name] = o
		}
	}
	return out
}

func (a autoscalers) of(o *object) *object { return a[o.namespace+"/"+o.kind+"/"+o.name] }

func selects(r v1alpha1.Replicas, sel labels.Selector, o *object) bool {
	return (r.Kind == "" || r.Kind == o.kind) &&
		(r.Name == "" || r.Name == o.name) &&
		(r.Namespace == "" || r.Namespace == o.namespace) &&
		(r.LabelSelector == "" || sel.Matches(labels.Set(o.labels)))
}

// planReplicas plans the replica edits of one object. A workload that a
// HorizontalPodAutoscaler in the input scales keeps its spec.replicas (the
// autoscaler owns it; setting it would fight the autoscaler on every sync):
// the rule moves the autoscaler's floor instead, which is what pinning a
// replica count means for an autoscaled workload.
func (p *plan) planReplicas(o *object, hpas autoscalers) {
	paths := replicaFields(o, p.cfg.FieldSpecs)
	if len(paths) == 0 {
		return
	}
	for i, r := range p.cfg.Replicas {
		if !selects(r, p.selectors[i], o) {
			continue
		}
		p.matched[fmt.Sprintf("replicas[%d]", i)] = true
		if prev, taken := p.replicaOwner[o.id()]; taken {
			p.errorf(o, "replicas[%d] and replicas[%d] both select %s with different counts; make the selectors disjoint", prev, i, o.id())
			continue
		}
		p.replicaOwner[o.id()] = i
		if hpa := hpas.of(o); hpa != nil {
			p.planAutoscalerFloor(hpa, o, i, *r.Count)
			continue
		}
		for _, path := range paths {
			p.setCount(o, path, *r.Count, fmt.Sprintf("replicas[%d]", i))
		}
	}
}

// setCount plans setting the integer at path, creating it (and its parent
// mappings) when missing, as kustomize's replicas transformer does.
func (p *plan) setCount(o *object, path []string, count int64, rule string) {
	at := strings.Join(path, ".")
	current := o.node.Field(path[0])
	var leaf *yaml.RNode
	if current != nil {
		leaf, _ = o.node.Pipe(yaml.Lookup(path...))
	}
	old := "unset"
	if leaf != nil {
		if leaf.YNode().Kind != yaml.ScalarNode {
			p.errorf(o, "%s: %s is not a number; fix the manifest or the fieldSpec", rule, at)
			return
		}
		if leaf.YNode().Value == strconv.FormatInt(count, 10) {
			return
		}
		old = leaf.YNode().Value
	}
	for i := 1; i < len(path); i++ {
		if parent, _ := o.node.Pipe(yaml.Lookup(path[:i]...)); parent != nil && parent.YNode().Kind != yaml.MappingNode {
			p.errorf(o, "%s: cannot set %s: %s is not a mapping", rule, at, strings.Join(path[:i], "."))
			return
		}
	}
	node := o.node
	p.edits = append(p.edits, edit{func() error {
		parent, err := node.Pipe(yaml.LookupCreate(yaml.MappingNode, path[:len(path)-1]...))
		if err != nil {
			return fmt.Errorf("set %s of %s: %w", at, o.id(), err)
		}
		return parent.PipeE(yaml.SetField(path[len(path)-1], intNode(count)))
	}})
	var from any // omitted from the result when the field was unset
	if n, err := strconv.ParseInt(old, 10, 64); err == nil {
		from = n
	}
	p.info(o, at, from, count, "%s: set %s to %d (was %s)", rule, at, count, old)
}

// planAutoscalerFloor moves the autoscaler's minReplicas to count (and
// maxReplicas up to it when below), leaving the workload's own count alone.
func (p *plan) planAutoscalerFloor(hpa, workload *object, rule int, count int64) {
	ruleName := fmt.Sprintf("replicas[%d]", rule)
	if count < 1 {
		p.errorf(hpa, "%s: count 0 for %s, which HorizontalPodAutoscaler %s scales; an autoscaler's minReplicas must be at least 1: remove the autoscaler or use a count of 1 or more",
			ruleName, workload.id(), hpa.name)
		return
	}
	minReplicas := int64(1) // the API default
	if s := scalar(hpa.node, "spec", "minReplicas"); s != "" {
		minReplicas, _ = strconv.ParseInt(s, 10, 64)
	}
	maxReplicas := count
	if s := scalar(hpa.node, "spec", "maxReplicas"); s != "" {
		maxReplicas, _ = strconv.ParseInt(s, 10, 64)
	}
	why := fmt.Sprintf("%s: %s is scaled by this autoscaler, so its spec.replicas is left alone and", ruleName, workload.id())
	if minReplicas != count {
		p.setAutoscalerField(hpa, "minReplicas", minReplicas, count, why)
	}
	if maxReplicas < count {
		p.setAutoscalerField(hpa, "maxReplicas", maxReplicas, count, why)
	}
}

func (p *plan) setAutoscalerField(hpa *object, field string, old, count int64, why string) {
	node := hpa.node
	p.edits = append(p.edits, edit{func() error {
		spec, err := node.Pipe(yaml.LookupCreate(yaml.MappingNode, "spec"))
		if err != nil {
			return fmt.Errorf("set spec.%s of %s: %w", field, hpa.id(), err)
		}
		return spec.PipeE(yaml.SetField(field, intNode(count)))
	}})
	p.info(hpa, "spec."+field, old, count, "%s spec.%s is set to %d (was %d)", why, field, count, old)
}
