// Package kustomize builds the repository's kustomizations in process, with
// the same kustomize API the kustomize CLI is built on (no plugins, as
// Argo CD and Flux build them), for the generators of the Helm chart and
// the OLM bundle, and for the release manifest.
package kustomize

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Build returns the objects of the kustomization in dir, in kustomize's
// output order.
func Build(dir string) ([]*yaml.RNode, error) {
	res, err := run(dir, krusty.MakeDefaultOptions())
	if err != nil {
		return nil, err
	}
	return res.ToRNodeSlice(), nil
}

// BuildYAML returns the kustomization in dir as `kustomize build dir`
// prints it.
func BuildYAML(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	// The CLI without --reorder: the kustomization's sortOptions, else
	// kustomize's legacy order (Namespaces first).
	opts.Reorder = krusty.ReorderOptionUnspecified
	res, err := run(dir, opts)
	if err != nil {
		return nil, err
	}
	return res.AsYaml()
}

func run(dir string, opts *krusty.Options) (resmap.ResMap, error) {
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return res, nil
}

// Find returns the object of the given kind and name, or an error naming
// what the generators expected to find in dir.
func Find(objects []*yaml.RNode, kind, name string) (*yaml.RNode, error) {
	for _, o := range objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o, nil
		}
	}
	return nil, fmt.Errorf("no %s %s in the kustomize output", kind, name)
}

// Read returns the objects of one YAML file, as kustomize would load it.
func Read(path string) ([]*yaml.RNode, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objects, err := kio.FromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objects, nil
}
