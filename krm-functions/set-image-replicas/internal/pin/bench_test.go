package pin

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// benchResources is the size of the benchmark input: 10,000, or
// $BENCH_RESOURCES (make bench passes it through).
var benchResources = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_RESOURCES")); err == nil && n > 0 {
		return n
	}
	return 10000
}()

// benchInput returns benchResources manifests: Deployments (two containers
// each, one of them the pinned image), Services and ConfigMaps.
func benchInput() string {
	var b strings.Builder
	for i := 0; i < benchResources; i++ {
		switch i % 4 {
		case 0, 1:
			fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%d
  labels: {app: app-%d}
spec:
  replicas: 1
  selector: {matchLabels: {app: app-%d}}
  template:
    metadata: {labels: {app: app-%d}}
    spec:
      containers:
      - name: cache
        image: memcached:1.6.38-alpine
        args: ["-m", "64"]
      - name: app
        image: registry.example.com/team/app-%d:v1
`, i, i, i, i, i%50)
		case 2:
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\nspec:\n  ports: [{port: 11211}]\n", i)
		default:
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  key: value-%d\n", i, i)
		}
	}
	return b.String()
}

// The same pins for both contenders: one image everywhere, and the replica
// count of ten Deployments by name (kustomize's replicas: selects by name).
const benchReplicaTargets = 10

func benchConfig() string {
	var b strings.Builder
	b.WriteString("apiVersion: fn.cache.example.com/v1alpha1\nkind: SetImageReplicas\nimages:\n- name: memcached\n  newTag: 1.6.39-alpine\nreplicas:\n")
	for i := 0; i < benchReplicaTargets; i++ {
		fmt.Fprintf(&b, "- name: app-%d\n  count: 3\n", i*4)
	}
	return b.String()
}

func benchKustomization() string {
	var b strings.Builder
	b.WriteString("resources:\n- resources.yaml\nimages:\n- name: memcached\n  newTag: 1.6.39-alpine\nreplicas:\n")
	for i := 0; i < benchReplicaTargets; i++ {
		fmt.Fprintf(&b, "- name: app-%d\n  count: 3\n", i*4)
	}
	return b.String()
}

// BenchmarkSetImageReplicas compares the function with kustomize's built-in
// images: and replicas: transformers on the same 10,000 resources and pins.
// Both read YAML text and write YAML text. `make bench` records the result
// in docs/benchmarks.md.
func BenchmarkSetImageReplicas(b *testing.B) {
	input := benchInput()
	config := benchConfig()

	b.Run("set-image-replicas", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(input)))
		for b.Loop() {
			cfg, err := yaml.Parse(config)
			if err != nil {
				b.Fatal(err)
			}
			items, err := (&kio.ByteReader{Reader: strings.NewReader(input), OmitReaderAnnotations: true}).Read()
			if err != nil {
				b.Fatal(err)
			}
			rl := &framework.ResourceList{FunctionConfig: cfg, Items: items}
			if err := (&Processor{}).Process(rl); err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			if err := (&kio.ByteWriter{Writer: &out}).Write(rl.Items); err != nil {
				b.Fatal(err)
			}
			if n := len(rl.Results); n != benchResources/2+benchReplicaTargets {
				b.Fatalf("%d changes, want %d", n, benchResources/2+benchReplicaTargets)
			}
		}
	})

	b.Run("kustomize-images-replicas", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(input)))
		fs := filesys.MakeFsInMemory()
		if err := fs.WriteFile("/app/resources.yaml", []byte(input)); err != nil {
			b.Fatal(err)
		}
		if err := fs.WriteFile("/app/kustomization.yaml", []byte(benchKustomization())); err != nil {
			b.Fatal(err)
		}
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		for b.Loop() {
			m, err := k.Run(fs, "/app")
			if err != nil {
				b.Fatal(err)
			}
			out, err := m.AsYaml()
			if err != nil {
				b.Fatal(err)
			}
			if !bytes.Contains(out, []byte("memcached:1.6.39-alpine")) {
				b.Fatal("kustomize did not pin the image")
			}
		}
	})
}
