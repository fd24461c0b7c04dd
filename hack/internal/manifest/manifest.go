// Package manifest turns typed API objects into the YAML the repository
// commits: without the fields a typed object always writes and no
// manifest wants (creationTimestamp: null, an empty status).
package manifest

import (
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Node is o as YAML, without metadata.creationTimestamp, status, and the
// creationTimestamp of the pod template at each of templates (paths to a
// template's metadata, such as a CSV's deployment specs).
func Node(o any, templates ...[]string) (*yaml.RNode, error) {
	raw, err := sigsyaml.Marshal(o)
	if err != nil {
		return nil, err
	}
	n, err := yaml.Parse(string(raw))
	if err != nil {
		return nil, err
	}
	for _, path := range append([][]string{{"metadata"}}, templates...) {
		if err := n.PipeE(yaml.Lookup(path...), yaml.Clear("creationTimestamp")); err != nil {
			return nil, err
		}
	}
	if err := n.PipeE(yaml.Clear("status")); err != nil {
		return nil, err
	}
	return n, nil
}
