package pin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// FuzzProcess feeds arbitrary configurations and resources through the
// whole function. Whatever the input, it must not panic, and a run that
// fails must not return items.
//
//	go test ./internal/pin -run '^$' -fuzz FuzzProcess -fuzztime 5m
func FuzzProcess(f *testing.F) {
	for _, dir := range append(glob(f, "success"), glob(f, "error")...) {
		raw, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		rl, err := yaml.Parse(string(raw))
		if err != nil {
			continue // the malformed-YAML case
		}
		cfg, _ := rl.Pipe(yaml.Lookup("functionConfig"))
		items, _ := rl.Pipe(yaml.Lookup("items"))
		if cfg != nil && items != nil {
			f.Add(cfg.MustString(), items.MustString())
		}
	}
	f.Fuzz(func(t *testing.T, config, items string) {
		cfg, err := yaml.Parse(config)
		if err != nil {
			return
		}
		list, err := (&kio.ByteReader{Reader: strings.NewReader(items), OmitReaderAnnotations: true}).Read()
		if err != nil {
			return
		}
		rl := &framework.ResourceList{FunctionConfig: cfg, Items: list}
		if err := (&Processor{}).Process(rl); err != nil && len(rl.Items) != 0 {
			t.Fatalf("failed run returned %d items", len(rl.Items))
		}
		var out bytes.Buffer
		_ = (&kio.ByteWriter{Writer: &out}).Write(rl.Items)
	})
}

func glob(f *testing.F, dir string) []string {
	dirs, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil {
		f.Fatal(err)
	}
	return dirs
}
