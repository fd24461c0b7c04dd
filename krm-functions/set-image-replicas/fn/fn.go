// Package fn runs set-image-replicas in-process, for Go programs that pin
// files (the repository's `make pin`, `make promote`, `make retarget` and
// `make release`): the same processor, read and written by the same kyaml
// framework call as the binary's standalone mode (`set-image-replicas
// --quiet CONFIG FILE`), so the bytes it returns are the ones the binary
// would print.
package fn

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
	"github.com/example/memcached-operator/krm-functions/set-image-replicas/internal/pin"
)

// New returns an empty config named name, with its apiVersion and kind set.
func New(name string) *v1alpha1.SetImageReplicas {
	return &v1alpha1.SetImageReplicas{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Metadata: v1alpha1.Metadata{Name: name}}
}

// Encode returns cfg as a YAML document, as a config file holds it.
func Encode(cfg *v1alpha1.SetImageReplicas) ([]byte, error) {
	raw, err := sigsyaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", v1alpha1.Kind, cfg.Metadata.Name, err)
	}
	return raw, nil
}

// Apply runs the function with cfg on resources (YAML documents) and
// returns the resources it writes. When any rule fails, it returns the
// function's error results and no resources: nothing is half-pinned.
func Apply(cfg *v1alpha1.SetImageReplicas, resources []byte) ([]byte, error) {
	raw, err := Encode(cfg)
	if err != nil {
		return nil, err
	}
	config, err := yaml.Parse(string(raw))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	rw := &kio.ByteReadWriter{
		// As the binary reads its files: each one starts a new document.
		Reader:         bytes.NewReader(append([]byte("\n---\n"), resources...)),
		Writer:         &out,
		FunctionConfig: config,
		NoWrap:         true,
	}
	if err := framework.Execute(&pin.Processor{}, rw); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
