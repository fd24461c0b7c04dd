package pins

import (
	"strings"
	"testing"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
)

func TestParseImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		ref     string
		want    v1alpha1.Image
		wantErr string
	}{
		{ref: "memcached:1.6.40-alpine", want: v1alpha1.Image{Name: "memcached", NewTag: "1.6.40-alpine"}},
		{ref: "localhost:5000/memcached-operator:v0.2.0", want: v1alpha1.Image{Name: "localhost:5000/memcached-operator", NewTag: "v0.2.0"}},
		{ref: "registry.example.com/memcached-operator:v0.3.0@" + digest, want: v1alpha1.Image{Name: "registry.example.com/memcached-operator", NewTag: "v0.3.0", Digest: digest}},
		{ref: "busybox@" + digest, want: v1alpha1.Image{Name: "busybox", Digest: digest}},
		{ref: "localhost:5000/memcached-operator", wantErr: "give a tag, a digest or both"},
		{ref: "Memcached:1.6", wantErr: "repository name must be lowercase"},
		{ref: "memcached@sha256:abc", wantErr: "invalid"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := ParseImage(tc.ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseReplicas(t *testing.T) {
	got, err := ParseReplicas("Memcached/app-cache=5")
	if err != nil || got.Kind != "Memcached" || got.Name != "app-cache" || got.Count == nil || *got.Count != 5 {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"Memcached/app-cache=-1", "app-cache=5", "Memcached/app-cache", "Memcached/App=1"} {
		if _, err := ParseReplicas(bad); err == nil || !strings.Contains(err.Error(), "want Kind/name=count") {
			t.Errorf("%q: error %v, want one naming Kind/name=count", bad, err)
		}
	}
}
