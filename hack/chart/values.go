package chart

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// value is one knob of values.yaml, or an object of knobs: the one
// definition values.yaml (with its comments) and values.schema.json are
// both written from, so they cannot disagree.
type value struct {
	key string
	// doc is the comment above the key in values.yaml.
	doc string
	// def is a leaf's default; schema its JSON schema.
	def    any
	schema map[string]any
	// fields are an object's knobs.
	fields []value
}

func object(key, doc string, fields ...value) value {
	return value{key: key, doc: doc, fields: fields}
}

func leaf(key, doc string, def any, schema map[string]any) value {
	return value{key: key, doc: doc, def: def, schema: schema}
}

var (
	boolean    = map[string]any{"type": "boolean"}
	anyObject  = map[string]any{"type": "object"}
	stringMap  = map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	dnsLabel   = map[string]any{"type": "string", "pattern": `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, "maxLength": 63}
	objectList = map[string]any{"type": "array", "items": map[string]any{"type": "object"}}
)

// Defaults returns the values as a map, as Helm reads values.yaml.
func (v value) defaults() any {
	if v.fields == nil {
		return v.def
	}
	m := map[string]any{}
	for _, f := range v.fields {
		m[f.key] = f.defaults()
	}
	return m
}

// jsonSchema is the JSON schema of v: objects are closed
// (additionalProperties: false), so a misspelled knob is an error instead
// of being silently ignored.
func (v value) jsonSchema() map[string]any {
	if v.fields == nil {
		s := map[string]any{}
		for k, x := range v.schema {
			s[k] = x
		}
		if v.doc != "" {
			s["description"] = v.doc
		}
		return s
	}
	props := map[string]any{}
	for _, f := range v.fields {
		props[f.key] = f.jsonSchema()
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if v.doc != "" {
		s["description"] = v.doc
	}
	return s
}

// schemaJSON is values.schema.json. Helm also passes a "global" object to
// every chart, so the closed root allows it.
func schemaJSON(root value) ([]byte, error) {
	s := root.jsonSchema()
	s["$schema"] = "https://json-schema.org/draft-07/schema#"
	s["title"] = "Values of the memcached-operator chart"
	s["properties"].(map[string]any)["global"] = map[string]any{"type": "object"}
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// valuesYAML is values.yaml: every knob with its default and its comment.
func valuesYAML(root value, header string) ([]byte, error) {
	n, err := root.node()
	if err != nil {
		return nil, err
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}, HeadComment: header}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (v value) node() (*yaml.Node, error) {
	if v.fields == nil {
		n := &yaml.Node{}
		if err := n.Encode(v.def); err != nil {
			return nil, fmt.Errorf("%s: %w", v.key, err)
		}
		return n, nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range v.fields {
		val, err := f.node()
		if err != nil {
			return nil, err
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: f.key, HeadComment: f.doc}, val)
	}
	return m, nil
}
