package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/kustomize/kyaml/fn/framework/frameworktestutil"
)

// Standalone mode: `set-image-replicas config.yaml input*.yaml` writes the
// pinned resources (not a ResourceList) to stdout.
func TestStandalone(t *testing.T) {
	checker := frameworktestutil.CommandResultsChecker{
		TestDataDirectory: filepath.Join("testdata", "standalone"),
		Command: func() *cobra.Command {
			cmd := newCommand(&bytes.Buffer{})
			// The checker treats anything on stderr as an error.
			_ = cmd.Flags().Set("quiet", "true")
			return cmd
		},
		UpdateExpectedFromActual: os.Getenv("UPDATE_GOLDEN") != "",
	}
	checker.Assert(t)
}

// With only CONFIG, the resources come from stdin and results go to stderr.
func TestStandaloneReadsStdin(t *testing.T) {
	dir := filepath.Join("testdata", "standalone", "pin-files")
	in, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := newCommand(&stderr)
	cmd.SetArgs([]string{filepath.Join(dir, "config.yaml")})
	cmd.SetIn(bytes.NewReader(in))
	cmd.SetOut(&stdout)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("execute: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "image: \"memcached:1.6.39-alpine\" # quoted") {
		t.Errorf("stdout does not hold the pinned Deployment:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "ResourceList") {
		t.Errorf("standalone output must be plain resources:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "[info] apps/v1/Deployment/web spec.replicas: replicas[0]: set spec.replicas to 5 (was 3)") {
		t.Errorf("stderr does not report the changes:\n%s", stderr.String())
	}
}

// In the KRM function protocol the reader annotations that kpt and kustomize
// use to write files back (path, index, sequence indentation) come back
// unchanged.
func TestResourceListKeepsInternalAnnotations(t *testing.T) {
	in := `apiVersion: config.kubernetes.io/v1
kind: ResourceList
functionConfig:
  apiVersion: fn.cache.example.com/v1alpha1
  kind: SetImageReplicas
  images: [{name: memcached, newTag: "1.6.39"}]
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    annotations:
      config.kubernetes.io/path: pods/p.yaml
      config.kubernetes.io/index: '2'
      internal.config.kubernetes.io/path: pods/p.yaml
      internal.config.kubernetes.io/index: '2'
      internal.config.kubernetes.io/seqindent: wide
      internal.config.kubernetes.io/id: '7'
  spec:
    containers: [{name: m, image: memcached}]
`
	var stdout, stderr bytes.Buffer
	cmd := newCommand(&stderr)
	cmd.SetArgs(nil)
	cmd.SetIn(strings.NewReader(in))
	cmd.SetOut(&stdout)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("execute: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"config.kubernetes.io/index: '2'",
		"internal.config.kubernetes.io/index: '2'",
		"internal.config.kubernetes.io/seqindent: wide",
		"internal.config.kubernetes.io/id: '7'",
		"internal.config.kubernetes.io/path: pods/p.yaml",
		"image: 'memcached:1.6.39'",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("the KRM protocol reports through results, not stderr; got %q", stderr.String())
	}
}
