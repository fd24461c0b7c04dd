package deploy

import (
	sigsyaml "sigs.k8s.io/yaml"
)

// yamlToObject decodes YAML into a typed API object, strictly.
func yamlToObject(s string, obj any) error {
	return sigsyaml.UnmarshalStrict([]byte(s), obj)
}
