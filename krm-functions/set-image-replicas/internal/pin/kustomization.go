package pin

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// planKustomization writes the rules into a kustomization's own images: and
// replicas: entries, when `kpt fn render` (or any KRM runner) hands the
// function an overlay directory. The overlay then stays a plain
// kustomization that `kustomize build`, Argo CD and Flux build without
// running functions, and the pin is one reviewed line in Git.
func (p *plan) planKustomization(o *object) {
	for i, rule := range p.cfg.Images {
		p.planKustomizationImage(o, i, rule)
	}
	for i, rule := range p.cfg.Replicas {
		p.planKustomizationReplicas(o, i, rule)
	}
}

// kustomizationPatches returns the package paths of the patch files the
// kustomizations in the input reference (patches[].path and the legacy
// patchesStrategicMerge and patchesJson6902).
func kustomizationPatches(objs []*object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		if !o.isKustomization() || o.path() == "" {
			continue
		}
		dir := filepath.Dir(o.path())
		add := func(p string) {
			if p != "" && !strings.Contains(p, "\n") {
				out[filepath.Join(dir, p)] = true
			}
		}
		for _, field := range []string{"patches", "patchesJson6902"} {
			if list, _ := o.node.Pipe(yaml.Lookup(field)); list != nil {
				for _, el := range list.YNode().Content {
					add(scalar(yaml.NewRNode(el), "path"))
				}
			}
		}
		if list, _ := o.node.Pipe(yaml.Lookup("patchesStrategicMerge")); list != nil {
			for _, el := range list.YNode().Content {
				if el.Kind == yaml.ScalarNode {
					add(el.Value) // a file name, or an inline patch (skipped)
				}
			}
		}
	}
	return out
}

func (p *plan) planKustomizationImage(o *object, i int, rule v1alpha1.Image) {
	ruleName := fmt.Sprintf("images[%d]", i)
	list, _ := o.node.Pipe(yaml.Lookup("images"))
	repo := v1alpha1.NormalizedName(rule.Name)
	if list != nil && list.YNode().Kind == yaml.SequenceNode {
		found := false
		for j, el := range list.YNode().Content {
			entry := yaml.NewRNode(el)
			if !entryMatches(entry, repo) {
				continue
			}
			found = true
			p.matched[ruleName] = true
			p.updateKustomizationImage(o, entry, fmt.Sprintf("images[%d]", j), ruleName, rule)
		}
		if found {
			return
		}
	}
	p.pending = append(p.pending, pendingEntry{rule: ruleName, field: "images", o: o, add: func() { p.appendKustomizationImage(o, ruleName, rule) }})
}

// appendKustomizationImage adds an images entry for a rule that matched no
// existing entry and nothing else in the input: a new pin.
func (p *plan) appendKustomizationImage(o *object, ruleName string, rule v1alpha1.Image) {
	entry := yaml.NewMapRNode(nil)
	fields := [][2]string{{"name", rule.Name}, {"newName", rule.NewName}, {"newTag", rule.NewTag}, {"digest", rule.Digest}}
	for _, kv := range fields {
		if kv[1] != "" {
			_ = entry.PipeE(yaml.SetField(kv[0], yaml.NewStringRNode(kv[1])))
		}
	}
	p.edits = append(p.edits, appendEntry(o.node, "images", entry))
	p.info(o, "images", nil, entry.MustString(), "%s: added an images entry for %s", ruleName, rule.Name)
}

// updateKustomizationImage gives an existing images entry the rule's
// values, with the same tag/digest semantics as for manifests.
func (p *plan) updateKustomizationImage(o *object, entry *yaml.RNode, at, ruleName string, rule v1alpha1.Image) {
	want := map[string]*string{} // nil: remove the field
	if rule.NewName != "" {
		want["newName"] = &rule.NewName
	}
	switch {
	case rule.NewTag != "" && rule.Digest != "":
		want["newTag"], want["digest"] = &rule.NewTag, &rule.Digest
	case rule.NewTag != "":
		if d := scalar(entry, "digest"); rule.DropsDigest(d) {
			p.errorf(o, "%s: %s (%s) is pinned by digest %s; newTag %s alone would drop it and run whatever that tag points at: give the new tag's digest too (digest: sha256:...), or set dropDigest: true to unpin it", ruleName, at, rule.Name, d, rule.NewTag)
			return
		}
		want["newTag"], want["digest"] = &rule.NewTag, nil
	case rule.Digest != "":
		want["newTag"], want["digest"] = nil, &rule.Digest
	}
	for _, field := range []string{"newName", "newTag", "digest"} {
		value, set := want[field]
		if !set {
			continue
		}
		old := scalar(entry, field)
		switch {
		case value == nil && entry.Field(field) != nil:
			p.edits = append(p.edits, edit{func() error { return entry.PipeE(yaml.Clear(field)) }})
			p.info(o, at+"."+field, old, nil, "%s: removed %s.%s %s (the rule sets %s)", ruleName, at, field, old, otherOf(field))
		case value != nil && old != *value:
			v := *value
			p.edits = append(p.edits, setScalar(entry, field, v, yaml.NodeTagString))
			var from any
			if old != "" {
				from = old
			}
			p.info(o, at+"."+field, from, v, "%s: set %s.%s to %s (was %s)", ruleName, at, field, v, orUnset(old))
		}
	}
}

func (p *plan) planKustomizationReplicas(o *object, i int, rule v1alpha1.Replicas) {
	ruleName := fmt.Sprintf("replicas[%d]", i)
	if rule.Name == "" || rule.LabelSelector != "" {
		p.warnf(o, "%s was not written to this kustomization: its replicas: entries select by name only; give the rule a name and no labelSelector", ruleName)
		return
	}
	count := *rule.Count
	list, _ := o.node.Pipe(yaml.Lookup("replicas"))
	if list != nil && list.YNode().Kind == yaml.SequenceNode {
		for j, el := range list.YNode().Content {
			entry := yaml.NewRNode(el)
			if name := scalar(entry, "name"); name != rule.Name {
				continue
			}
			p.matched[ruleName] = true
			p.setEntryCount(o, entry, fmt.Sprintf("replicas[%d].count", j), ruleName, rule.Name, count)
			return
		}
	}
	p.pending = append(p.pending, pendingEntry{rule: ruleName, field: "replicas", o: o, add: func() { p.appendKustomizationReplicas(o, ruleName, rule.Name, count) }})
}

// appendKustomizationReplicas adds a replicas entry for a rule that matched
// no existing entry and nothing else in the input: a new pin.
func (p *plan) appendKustomizationReplicas(o *object, ruleName, name string, count int64) {
	entry := yaml.NewMapRNode(nil)
	_ = entry.PipeE(yaml.SetField("name", yaml.NewStringRNode(name)))
	_ = entry.PipeE(yaml.SetField("count", intNode(count)))
	p.edits = append(p.edits, appendEntry(o.node, "replicas", entry))
	p.info(o, "replicas", nil, count, "%s: added a replicas entry for %s with count %d", ruleName, name, count)
}

// pendingEntry is a kustomization entry a rule would add because no entry
// of that kustomization matches it.
type pendingEntry struct {
	rule, field string
	o           *object
	add         func()
}

// addNewEntries decides, once every item has been seen, what to do with
// rules that matched no existing images:/replicas: entry in some
// kustomization:
//
//   - a rule that matched something else (an entry of another
//     kustomization, such as the package's pins component, or a resource)
//     adds nothing: its pin already lives there;
//   - with failOnEmptyMatch, a rule that matched nothing at all is an error
//     (reported as unmatched), as it is when the function runs standalone:
//     a typo never becomes a dead entry;
//   - otherwise it is a new pin, added once, to the kustomization that
//     already holds the package's pins of that kind, else to the one at the
//     package root.
func (p *plan) addNewEntries() {
	byRule := map[string][]pendingEntry{}
	var order []string
	for _, pe := range p.pending {
		if _, seen := byRule[pe.rule]; !seen {
			order = append(order, pe.rule)
		}
		byRule[pe.rule] = append(byRule[pe.rule], pe)
	}
	for _, rule := range order {
		if p.matched[rule] || p.cfg.FailOnEmptyMatch {
			continue
		}
		home := byRule[rule][0]
		for _, pe := range byRule[rule] {
			if has, _ := pe.o.node.Pipe(yaml.Lookup(pe.field)); has != nil {
				home = pe
				break
			}
			if filepath.Dir(pe.o.path()) == "." {
				home = pe
			}
		}
		home.add()
		p.matched[rule] = true
	}
}

// appendEntry adds entry to the list field of a kustomization, creating the
// list when the kustomization has none.
func appendEntry(kustomization *yaml.RNode, field string, entry *yaml.RNode) edit {
	return edit{func() error {
		seq, err := kustomization.Pipe(yaml.LookupCreate(yaml.SequenceNode, field))
		if err != nil {
			return err
		}
		seq.YNode().Content = append(seq.YNode().Content, entry.YNode())
		return nil
	}}
}

// setScalar sets field of a mapping, changing the existing value node in
// place so that its comments and quoting survive, or adding the field.
func setScalar(mapping *yaml.RNode, field, value, tag string) edit {
	return edit{func() error {
		if f := mapping.Field(field); f != nil && f.Value.YNode().Kind == yaml.ScalarNode {
			n := f.Value.YNode()
			n.Value, n.Tag = value, tag
			return nil
		}
		return mapping.PipeE(yaml.SetField(field, yaml.NewRNode(&yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value})))
	}}
}

// setEntryCount plans setting the count of a replicas entry.
func (p *plan) setEntryCount(o *object, entry *yaml.RNode, at, ruleName, what string, count int64) {
	old := scalar(entry, "count")
	if old == fmt.Sprint(count) {
		return
	}
	p.edits = append(p.edits, setScalar(entry, "count", strconv.FormatInt(count, 10), yaml.NodeTagInt))
	var from any
	if n, err := strconv.ParseInt(old, 10, 64); err == nil {
		from = n
	}
	p.info(o, at, from, count, "%s: set replicas %s to %d (was %s)", ruleName, what, count, orUnset(old))
}

func otherOf(field string) string {
	if field == "digest" {
		return "only newTag"
	}
	return "only digest"
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// entryMatches reports whether an images: entry (of a kustomization or a
// pins file) is about repository repo: its name, or the newName it is
// retargeted to (a fork's registry, a mirror), so that a pin can name the
// repository the image is actually pulled from.
func entryMatches(entry *yaml.RNode, repo string) bool {
	if v1alpha1.NormalizedName(scalar(entry, "name")) == repo {
		return true
	}
	n := scalar(entry, "newName")
	return n != "" && v1alpha1.NormalizedName(n) == repo
}

// planPinFile updates the rules of another SetImageReplicas file to this
// run's values: `make pin` edits an overlay's images.yaml and replicas.yaml
// this way, and promotion runs one environment's images.yaml against the
// next one's. Only existing rules are updated (images by repository,
// replicas by identical selector), so a file never grows rules it did not
// have: a replicas file gets no image rules.
func (p *plan) planPinFile(o *object) {
	if list, _ := o.node.Pipe(yaml.Lookup("images")); list != nil && list.YNode().Kind == yaml.SequenceNode {
		for i, rule := range p.cfg.Images {
			ruleName := fmt.Sprintf("images[%d]", i)
			repo := v1alpha1.NormalizedName(rule.Name)
			for j, el := range list.YNode().Content {
				entry := yaml.NewRNode(el)
				if entryMatches(entry, repo) {
					p.matched[ruleName] = true
					p.updateKustomizationImage(o, entry, fmt.Sprintf("images[%d]", j), ruleName, rule)
				}
			}
		}
	}
	if list, _ := o.node.Pipe(yaml.Lookup("replicas")); list != nil && list.YNode().Kind == yaml.SequenceNode {
		for i, rule := range p.cfg.Replicas {
			for j, el := range list.YNode().Content {
				entry := yaml.NewRNode(el)
				if scalar(entry, "kind") != rule.Kind || scalar(entry, "name") != rule.Name ||
					scalar(entry, "namespace") != rule.Namespace || scalar(entry, "labelSelector") != rule.LabelSelector {
					continue
				}
				ruleName := fmt.Sprintf("replicas[%d]", i)
				p.matched[ruleName] = true
				p.setEntryCount(o, entry, fmt.Sprintf("replicas[%d].count", j), ruleName, describeSelector(rule), *rule.Count)
			}
		}
	}
}
