// Package v1alpha1 is the configuration API of the set-image-replicas KRM
// function: kind SetImageReplicas in fn.cache.example.com/v1alpha1.
//
// Decode is strict (an unknown field is an error that names its path), and
// Validate checks every rule, including each image reference with
// github.com/distribution/reference, so the function never starts editing
// with a configuration it cannot fully apply.
package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// API identity of the configuration.
const (
	APIVersion = "fn.cache.example.com/v1alpha1"
	Kind       = "SetImageReplicas"
)

// SetImageReplicas pins container images and replica counts.
type SetImageReplicas struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata,omitempty"`

	// Images to pin. Each rule matches images by repository.
	Images []Image `json:"images,omitempty"`

	// Replicas to pin. Each rule selects workloads by kind, name,
	// namespace and labels.
	Replicas []Replicas `json:"replicas,omitempty"`

	// FieldSpecs adds image and replica fields of other kinds (custom
	// resources) to the built-in ones.
	FieldSpecs []FieldSpec `json:"fieldSpecs,omitempty"`

	// FailOnEmptyMatch turns "rule matched nothing" from a warning into an
	// error, for pipelines where a typo must stop the rollout.
	FailOnEmptyMatch bool `json:"failOnEmptyMatch,omitempty"`
}

// Metadata is the part of ObjectMeta a function configuration carries.
type Metadata struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Image pins one image.
//
// name matches the repository of an image exactly, after Docker Hub
// normalisation: "memcached", "library/memcached" and
// "docker.io/library/memcached" are the same repository; "memcachedx" and
// "my.registry/memcached" are not. Tags and digests of the matched image do
// not matter.
//
// The result keeps the image's name as written unless newName is set, and:
//   - newTag only: name:newTag. An image already pinned by digest is an
//     error: dropping the digest would run whatever the tag points at, so
//     give the new tag's digest, or say dropDigest: true;
//   - digest only: name@digest (an existing tag is dropped, it would describe another image);
//   - newTag and digest: name:newTag@digest (the tag for humans, the digest decides what runs).
type Image struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// DropDigest lets a newTag-only rule unpin an image that is pinned by
	// digest. Without it, that is an error.
	DropDigest bool `json:"dropDigest,omitempty"`
}

// DropsDigest reports whether applying the rule to an image or entry with
// the given digest would remove the digest without being told to.
func (img Image) DropsDigest(current string) bool {
	return current != "" && img.NewTag != "" && img.Digest == "" && !img.DropDigest
}

// Replicas pins the replica count of the workloads it selects. At least one
// of kind, name, namespace and labelSelector must be set.
type Replicas struct {
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector in kubectl's syntax, e.g. "app=memcached,tier in (cache)".
	LabelSelector string `json:"labelSelector,omitempty"`
	// Count is the number of replicas, 0 or more.
	Count *int64 `json:"count"`
}

// FieldType says what a FieldSpec path holds.
type FieldType string

// Field types.
const (
	FieldTypeImage    FieldType = "image"
	FieldTypeReplicas FieldType = "replicas"
)

// FieldSpec names a field of a custom resource that holds an image or a
// replica count, as kustomize's fieldSpecs do.
type FieldSpec struct {
	Group   string `json:"group,omitempty"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind"`
	// Path is slash-separated, like kustomize's: "spec/runner/image". Lists
	// on the way are traversed: "spec/workers/image" visits every worker.
	Path string    `json:"path"`
	Type FieldType `json:"type"`
}

// Decode reads a SetImageReplicas strictly: unknown fields are errors that
// name their path, so a misspelled "newTg" cannot silently do nothing.
func Decode(data []byte) (*SetImageReplicas, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("functionConfig is not valid YAML: %w", err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("functionConfig is not valid YAML: %w", err)
	}
	if errs := unknownFields(generic, &SetImageReplicas{}, ""); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg := &SetImageReplicas{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("functionConfig: %w", err)
	}
	return cfg, nil
}

// Validate checks every rule and returns all problems at once, each naming
// the field and what to do about it.
func (c *SetImageReplicas) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.APIVersion != APIVersion || c.Kind != Kind {
		bad("apiVersion/kind: want %s/%s, got %s/%s", APIVersion, Kind, c.APIVersion, c.Kind)
	}
	if len(c.Images) == 0 && len(c.Replicas) == 0 {
		bad("images, replicas: nothing to do; add at least one images or replicas rule")
	}

	seenImages := map[string]int{}
	for i, img := range c.Images {
		field := fmt.Sprintf("images[%d]", i)
		if err := img.validate(field); err != nil {
			errs = append(errs, err)
			continue
		}
		repo := NormalizedName(img.Name)
		if j, dup := seenImages[repo]; dup {
			bad("%s.name: %q is the same repository as images[%d].name; merge the two rules", field, img.Name, j)
		}
		seenImages[repo] = i
	}

	seenReplicas := map[Replicas]int{}
	for i, r := range c.Replicas {
		field := fmt.Sprintf("replicas[%d]", i)
		if r.Kind == "" && r.Name == "" && r.Namespace == "" && r.LabelSelector == "" {
			bad("%s: empty selector would match every workload; set kind, name, namespace or labelSelector", field)
		}
		if r.LabelSelector != "" {
			if _, err := labels.Parse(r.LabelSelector); err != nil {
				bad("%s.labelSelector: %v", field, err)
			}
		}
		switch {
		case r.Count == nil:
			bad("%s.count: required; set the number of replicas (0 or more)", field)
		case *r.Count < 0:
			bad("%s.count: %d is negative; use 0 or more", field, *r.Count)
		case *r.Count > 1<<31-1:
			bad("%s.count: %d does not fit an int32 replica count", field, *r.Count)
		}
		key := r
		key.Count = nil
		if j, dup := seenReplicas[key]; dup {
			bad("%s: same selector as replicas[%d]; merge the two rules", field, j)
		}
		seenReplicas[key] = i
	}

	for i, fs := range c.FieldSpecs {
		field := fmt.Sprintf("fieldSpecs[%d]", i)
		if fs.Kind == "" {
			bad("%s.kind: required", field)
		}
		if strings.Trim(fs.Path, "/") == "" {
			bad("%s.path: required, slash-separated like spec/runner/image", field)
		}
		if fs.Type != FieldTypeImage && fs.Type != FieldTypeReplicas {
			bad("%s.type: %q is not one of %q, %q", field, fs.Type, FieldTypeImage, FieldTypeReplicas)
		}
	}
	return errors.Join(errs...)
}

func (img Image) validate(field string) error {
	var errs []error
	if img.Name == "" {
		return fmt.Errorf("%s.name: required; the repository to match, such as memcached or registry.example.com/team/app", field)
	}
	if err := validateRepository(field+".name", img.Name, "name matches a repository, put the tag in newTag and the digest in digest"); err != nil {
		errs = append(errs, err)
	}
	if img.NewName == "" && img.NewTag == "" && img.Digest == "" {
		errs = append(errs, fmt.Errorf("%s: nothing to change; set newName, newTag or digest", field))
	}
	if img.NewName != "" {
		if err := validateRepository(field+".newName", img.NewName, "use newTag and digest for those"); err != nil {
			errs = append(errs, err)
		}
	}
	if img.NewTag != "" && !anchoredTag.MatchString(img.NewTag) {
		errs = append(errs, fmt.Errorf("%s.newTag: %q is not a valid tag (up to 128 of [A-Za-z0-9_.-], not starting with . or -)", field, img.NewTag))
	}
	if img.Digest != "" {
		if _, err := digest.Parse(img.Digest); err != nil {
			errs = append(errs, fmt.Errorf("%s.digest: %q is not a valid digest such as sha256:<64 hex digits>: %w", field, img.Digest, err))
		}
	}
	if img.DropDigest && (img.NewTag == "" || img.Digest != "") {
		errs = append(errs, fmt.Errorf("%s.dropDigest: only a rule with newTag and no digest can drop a digest; remove dropDigest", field))
	}
	return errors.Join(errs...)
}

// validateRepository checks that value is a repository without tag or digest.
func validateRepository(field, value, hint string) error {
	named, err := reference.ParseNormalizedNamed(value)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %q is not a valid repository: %w", field, value, err)
	case !reference.IsNameOnly(named):
		return fmt.Errorf("%s: %q has a tag or digest; %s", field, value, hint)
	}
	return nil
}

// NormalizedName is the fully qualified repository of an image reference
// ("memcached:1.6" -> "docker.io/library/memcached"), or "" when the
// reference does not parse.
func NormalizedName(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	return named.Name()
}
