package image

import (
	"errors"
	"strings"
	"testing"
)

const pinsFile = `# Image pins, kept by make pin.
apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: image-pins
images:
# the operator, retargeted to the release registry
- name: registry.example.com/memcached-operator
  newName: ghcr.io/acme/memcached-operator
  newTag: v0.2.0
- name: memcached
  newTag: 1.6.39-alpine
  digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
- name: busybox
  digest: sha256:2222222222222222222222222222222222222222222222222222222222222222
`

// served is the registry of these tests: reference → digest.
var served = map[string]string{
	"ghcr.io/acme/memcached-operator:v0.2.0": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	"memcached:1.6.39-alpine":                "sha256:1111111111111111111111111111111111111111111111111111111111111111",
	"busybox@sha256:2222222222222222222222222222222222222222222222222222222222222222": "sha256:2222222222222222222222222222222222222222222222222222222222222222",
}

func lookup(registry map[string]string) func(string) (string, error) {
	return func(ref string) (string, error) {
		if d, ok := registry[ref]; ok {
			return d, nil
		}
		return "", errors.New(ref + ": MANIFEST_UNKNOWN")
	}
}

func TestResolvePinsAddsServedDigestsAndKeepsComments(t *testing.T) {
	got, err := ResolvePinsYAML("images.yaml", []byte(pinsFile), lookup(served))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(pinsFile, "  newTag: v0.2.0\n",
		"  newTag: v0.2.0\n  digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 1)
	if string(got) != want {
		t.Errorf("pins file:\n%s\nwant:\n%s", got, want)
	}
}

func TestResolvePinsRefusesAndReturnsNothing(t *testing.T) {
	stale := map[string]string{}
	for k, v := range served {
		stale[k] = v
	}
	stale["memcached:1.6.39-alpine"] = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	missing := map[string]string{}
	for k, v := range served {
		missing[k] = v
	}
	delete(missing, "busybox@sha256:2222222222222222222222222222222222222222222222222222222222222222")
	for name, tc := range map[string]struct {
		registry map[string]string
		want     string
	}{
		"tag moved since the digest was pinned": {stale, "images[1]: memcached:1.6.39-alpine is pinned to sha256:1111"},
		"digest-only pin not in the registry":   {missing, "images[2]: busybox@sha256:2222"},
		"tag not in the registry":               {map[string]string{}, "images[0]: ghcr.io/acme/memcached-operator:v0.2.0: MANIFEST_UNKNOWN"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ResolvePinsYAML("images.yaml", []byte(pinsFile), lookup(tc.registry))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Errorf("a refused resolution returned a pins file:\n%s", got)
			}
		})
	}
}
