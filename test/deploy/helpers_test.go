package deploy

import (
	"bytes"

	sigsyaml "sigs.k8s.io/yaml"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// yamlToObject decodes YAML into a typed API object, strictly.
func yamlToObject(s string, obj any) error {
	return sigsyaml.UnmarshalStrict([]byte(s), obj)
}
