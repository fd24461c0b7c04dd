package chart

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// templater turns an object of the kustomize output into a Helm template.
// The object is edited as YAML (kyaml): a value that becomes a template
// expression is replaced by a token, a map entry that becomes a block of
// template lines by a token key; the object is then serialized as
// kustomize would, and the tokens are replaced by their template text.
// Everything not replaced stays exactly as kustomize wrote it.
type templater struct {
	scalars map[string]string
	blocks  map[string]func(indent string) []string
}

func newTemplater() *templater {
	return &templater{scalars: map[string]string{}, blocks: map[string]func(string) []string{}}
}

// expr returns a token standing for a template expression, such as
// {{ .Release.Namespace }}, in a scalar's place.
func (t *templater) expr(e string) string {
	token := fmt.Sprintf("__tpl%d__", len(t.scalars))
	t.scalars[token] = e
	return token
}

// block returns a token key whose map entry becomes the lines render
// returns for its indentation.
func (t *templater) block(render func(indent string) []string) string {
	token := fmt.Sprintf("__blk%d__", len(t.blocks))
	t.blocks[token] = render
	return token
}

// set replaces the scalar at path with expression e.
func (t *templater) set(n *yaml.RNode, e string, path ...string) error {
	parent, err := n.Pipe(yaml.Lookup(path[:len(path)-1]...))
	if err != nil || parent == nil {
		return fmt.Errorf("%s %s has no %s", n.GetKind(), n.GetName(), strings.Join(path, "."))
	}
	if f := parent.Field(path[len(path)-1]); f == nil {
		return fmt.Errorf("%s %s has no %s", n.GetKind(), n.GetName(), strings.Join(path, "."))
	}
	return parent.PipeE(yaml.SetField(path[len(path)-1], yaml.NewScalarRNode(t.expr(e))))
}

// replace turns the entry field of map m into a block, in place.
func (t *templater) replace(m *yaml.RNode, field string, render func(indent string) []string) error {
	c := m.YNode().Content
	for i := 0; i < len(c); i += 2 {
		if c[i].Value == field {
			c[i].Value = t.block(render)
			c[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Value: ""}
			return nil
		}
	}
	return fmt.Errorf("no field %s to template", field)
}

// add appends a block to map m.
func (t *templater) add(m *yaml.RNode, render func(indent string) []string) {
	m.YNode().Content = append(m.YNode().Content,
		&yaml.Node{Kind: yaml.ScalarNode, Value: t.block(render)},
		&yaml.Node{Kind: yaml.ScalarNode, Value: ""})
}

var (
	blockLine   = regexp.MustCompile(`^(\s*)(__blk\d+__):.*$`)
	scalarToken = regexp.MustCompile(`__tpl\d+__`)
)

// render serializes n and replaces the tokens.
func (t *templater) render(n *yaml.RNode) (string, error) {
	s, err := n.String()
	if err != nil {
		return "", err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if m := blockLine.FindStringSubmatch(line); m != nil {
			out = append(out, t.blocks[m[2]](m[1])...)
			continue
		}
		if strings.Contains(line, "__blk") {
			return "", fmt.Errorf("a template block is not a map entry of its own: %q", line)
		}
		out = append(out, scalarToken.ReplaceAllStringFunc(line, func(tok string) string { return t.scalars[tok] }))
	}
	return strings.Join(out, "\n") + "\n", nil
}

// lines indents YAML text (a serialized node) by indent.
func lines(indent, text string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		out = append(out, indent+l)
	}
	return out
}

// toYAML is the block of a map entry whose value comes from values.yaml:
//
//	key:
//	  {{- toYaml .Values.x | nindent N }}
func toYAML(key, values string) func(string) []string {
	return func(indent string) []string {
		return []string{
			indent + key + ":",
			fmt.Sprintf("%s  {{- toYaml %s | nindent %d }}", indent, values, len(indent)+2),
		}
	}
}

// withYAML is an optional entry: present only when the value is not empty.
func withYAML(key, values string) func(string) []string {
	return func(indent string) []string {
		return []string{
			fmt.Sprintf("%s{{- with %s }}", indent, values),
			indent + key + ":",
			fmt.Sprintf("%s  {{- toYaml . | nindent %d }}", indent, len(indent)+2),
			indent + "{{- end }}",
		}
	}
}

// quoted is s as a YAML scalar, quoted only when YAML needs it.
func quoted(s string) string {
	n := yaml.NewScalarRNode(s)
	out, err := n.String()
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(out, "\n")
}
