package pin

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

// planImages plans the image edits of one object.
func (p *plan) planImages(o *object) {
	for _, path := range imageFields(o, p.cfg.FieldSpecs) {
		visit(o.node, path, "", func(leaf *yaml.RNode, at string) {
			node := leaf.YNode()
			if node.Kind != yaml.ScalarNode {
				return
			}
			old := node.Value
			for i, rule := range p.cfg.Images {
				updated, ok := rewrite(old, rule)
				if !ok {
					continue
				}
				p.matched[fmt.Sprintf("images[%d]", i)] = true
				if d := digestOf(old); rule.DropsDigest(d) {
					p.errorf(o, "images[%d]: %s is %s pinned by digest %s; newTag %s alone would drop it and run whatever that tag points at: give the new tag's digest too (digest: sha256:...), or set dropDigest: true to unpin it", i, at, old, d, rule.NewTag)
					return
				}
				if updated != old {
					p.edits = append(p.edits, edit{func() error { node.Value = updated; return nil }})
					p.info(o, at, old, updated, "images[%d]: set image %s (was %s)", i, updated, old)
				}
				return // repositories are unique across rules
			}
		})
	}
}

// rewrite applies rule to image. It reports false when the image does not
// parse or is another repository.
func rewrite(image string, rule v1alpha1.Image) (string, bool) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil || named.Name() != v1alpha1.NormalizedName(rule.Name) {
		return "", false
	}
	name := nameAsWritten(image)
	var tag, digest string
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		digest = d.Digest().String()
	}

	if rule.NewName != "" {
		name = rule.NewName
	}
	switch {
	case rule.NewTag != "" && rule.Digest != "":
		tag, digest = rule.NewTag, rule.Digest
	case rule.NewTag != "":
		tag, digest = rule.NewTag, ""
	case rule.Digest != "":
		tag, digest = "", rule.Digest
	}
	return compose(name, tag, digest), true
}

// digestOf returns the digest of a reference, or "".
func digestOf(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	if d, ok := named.(reference.Digested); ok {
		return d.Digest().String()
	}
	return ""
}

// nameAsWritten strips the tag and digest from a valid reference, keeping
// the repository exactly as the manifest spells it ("memcached" stays
// "memcached", not "docker.io/library/memcached").
func nameAsWritten(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

func compose(name, tag, digest string) string {
	if tag != "" {
		name += ":" + tag
	}
	if digest != "" {
		name += "@" + digest
	}
	return name
}
