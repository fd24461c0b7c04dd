package image

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ResolvePinsYAML gives every image pin of a set-image-replicas pins file (an
// overlay's images.yaml) the digest its registry serves for the pin's tag:
// the repository pulled is newName when the entry is retargeted, else name.
// A pin that already has a digest must match what the registry serves for
// its tag, or nothing is written: a digest is never taken from anywhere
// but the registry, and a stale or mistyped one is refused. Comments and
// layout survive.
// path names the file in errors; the new content is returned.
func ResolvePinsYAML(path string, raw []byte, digest func(ref string) (string, error)) ([]byte, error) {
	doc, err := yaml.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: want one SetImageReplicas document: %w", path, err)
	}
	list, err := doc.Pipe(yaml.Lookup("images"))
	if err != nil || list == nil {
		return nil, fmt.Errorf("%s has no images", path)
	}
	entries, err := list.Elements()
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		repo := field(e, "newName")
		if repo == "" {
			repo = field(e, "name")
		}
		tag, pinned := field(e, "newTag"), field(e, "digest")
		if tag == "" {
			if pinned == "" {
				return nil, fmt.Errorf("%s images[%d] (%s) has neither a tag nor a digest", path, i, repo)
			}
			if _, err := digest(repo + "@" + pinned); err != nil {
				return nil, fmt.Errorf("%s images[%d]: %s@%s is not in its registry: %w", path, i, repo, pinned, err)
			}
			continue
		}
		served, err := digest(repo + ":" + tag)
		if err != nil {
			return nil, fmt.Errorf("%s images[%d]: %w", path, i, err)
		}
		if pinned != "" && pinned != served {
			return nil, fmt.Errorf("%s images[%d]: %s:%s is pinned to %s, but the registry serves %s for that tag: refusing (re-pin the tag, or pin the image the digest names)", path, i, repo, tag, pinned, served)
		}
		if err := e.PipeE(yaml.SetField("digest", yaml.NewStringRNode(served))); err != nil {
			return nil, err
		}
	}
	out, err := doc.String()
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

func field(n *yaml.RNode, name string) string {
	v, err := n.Pipe(yaml.Lookup(name))
	if err != nil || v == nil {
		return ""
	}
	return v.YNode().Value
}
