package pin

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// podSpecPaths are where each built-in workload kind keeps its pod spec.
var podSpecPaths = map[groupKind][]string{
	{"", "Pod"}:                    {"spec"},
	{"", "PodTemplate"}:            {"template", "spec"},
	{"", "ReplicationController"}:  {"spec", "template", "spec"},
	{"apps", "Deployment"}:         {"spec", "template", "spec"},
	{"apps", "StatefulSet"}:        {"spec", "template", "spec"},
	{"apps", "DaemonSet"}:          {"spec", "template", "spec"},
	{"apps", "ReplicaSet"}:         {"spec", "template", "spec"},
	{"batch", "Job"}:               {"spec", "template", "spec"},
	{"batch", "CronJob"}:           {"spec", "jobTemplate", "spec", "template", "spec"},
	{"extensions", "Deployment"}:   {"spec", "template", "spec"},
	{"extensions", "DaemonSet"}:    {"spec", "template", "spec"},
	{"extensions", "ReplicaSet"}:   {"spec", "template", "spec"},
	{"apps", "ControllerRevision"}: nil, // history, never edited
}

// containerLists are every list of containers in a pod spec. kpt's
// set-image misses initContainers; ephemeralContainers are rare in
// manifests but legal in a Pod.
var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

// extraImagePaths and replicaPaths cover kinds whose images or replica
// counts are not in a pod template, starting with this repository's own
// Memcached.
var (
	extraImagePaths = map[groupKind][][]string{
		{"cache.example.com", "Memcached"}: {{"spec", "image"}, {"spec", "monitoring", "exporter", "image"}},
	}
	replicaPaths = map[groupKind][]string{
		{"", "ReplicationController"}:      {"spec", "replicas"},
		{"apps", "Deployment"}:             {"spec", "replicas"},
		{"apps", "StatefulSet"}:            {"spec", "replicas"},
		{"apps", "ReplicaSet"}:             {"spec", "replicas"},
		{"extensions", "Deployment"}:       {"spec", "replicas"},
		{"extensions", "ReplicaSet"}:       {"spec", "replicas"},
		{"cache.example.com", "Memcached"}: {"spec", "size"},
	}
)

type groupKind struct{ group, kind string }

// imageFields lists the image paths of o: the built-in ones for its kind
// and the matching fieldSpecs.
func imageFields(o *object, specs []v1alpha1.FieldSpec) [][]string {
	gk := groupKind{o.group, o.kind}
	var out [][]string
	if podSpec := podSpecPaths[gk]; podSpec != nil {
		for _, list := range containerLists {
			out = append(out, append(append(append([]string{}, podSpec...), list), "image"))
		}
	}
	out = append(out, extraImagePaths[gk]...)
	return append(out, fieldSpecPaths(o, specs, v1alpha1.FieldTypeImage)...)
}

// replicaFields lists the replica-count paths of o.
func replicaFields(o *object, specs []v1alpha1.FieldSpec) [][]string {
	var out [][]string
	if p, ok := replicaPaths[groupKind{o.group, o.kind}]; ok {
		out = append(out, p)
	}
	return append(out, fieldSpecPaths(o, specs, v1alpha1.FieldTypeReplicas)...)
}

func fieldSpecPaths(o *object, specs []v1alpha1.FieldSpec, t v1alpha1.FieldType) [][]string {
	var out [][]string
	for _, fs := range specs {
		if fs.Type != t || fs.Kind != o.kind ||
			(fs.Group != "" && fs.Group != o.group) || (fs.Version != "" && fs.Version != o.version) {
			continue
		}
		out = append(out, strings.Split(strings.Trim(fs.Path, "/"), "/"))
	}
	return out
}

// visit calls fn with every node found at path below node, and the node's
// path in result form ("spec.template.spec.containers[1].image"). Lists met
// on the way are traversed element by element, as kustomize's fieldSpecs do.
func visit(node *yaml.RNode, path []string, at string, fn func(leaf *yaml.RNode, at string)) {
	if node == nil {
		return
	}
	if node.YNode().Kind == yaml.SequenceNode {
		for i, el := range node.YNode().Content {
			visit(yaml.NewRNode(el), path, fmt.Sprintf("%s[%d]", at, i), fn)
		}
		return
	}
	if len(path) == 0 {
		fn(node, at)
		return
	}
	if node.YNode().Kind != yaml.MappingNode {
		return
	}
	field := node.Field(path[0])
	if field == nil {
		return
	}
	visit(field.Value, path[1:], dotted(at, path[0]), fn)
}

func dotted(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func intNode(v int64) *yaml.RNode {
	return yaml.NewRNode(&yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagInt, Value: fmt.Sprint(v)})
}

// scalar returns the value of the scalar at path, whatever its YAML tag, or
// "" when there is none.
func scalar(node *yaml.RNode, path ...string) string {
	v, err := node.Pipe(yaml.Lookup(path...))
	if err != nil || v == nil || v.YNode().Kind != yaml.ScalarNode {
		return ""
	}
	return v.YNode().Value
}
