// Package imageref splits image references the way the manifests write
// them (repository:tag), for the generators that read the release version
// from the manager's image tag.
package imageref

import "strings"

// SplitTag splits repository:tag; the colon of a registry's port is part of
// the repository. ok is false when there is no tag.
func SplitTag(image string) (repository, tag string, ok bool) {
	i := strings.LastIndex(image, ":")
	if i < 0 || i < strings.LastIndex(image, "/") {
		return image, "", false
	}
	return image[:i], image[i+1:], true
}
