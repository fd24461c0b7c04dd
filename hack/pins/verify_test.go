package pins

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/api/v1alpha1"
	"github.com/example/memcached-operator/krm-functions/set-image-replicas/fn"
)

// The release's own images pinned by digest are verified; upstream images
// and tags are not, and a failed verification refuses the whole change.
func TestVerifySignedChecksTheReleasesDigests(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	cfg := fn.New("pins")
	cfg.Images = []v1alpha1.Image{
		{Name: "controller", NewName: "registry.example.com/team/memcached-operator", NewTag: "v0.2.0", Digest: digest},
		{Name: "registry.example.com/team/set-image-replicas", Digest: digest},
		{Name: "memcached", NewName: "registry.example.com/memcached", NewTag: "1.6.39", Digest: digest},
		{Name: "registry.example.com/team/memcached-operator-bundle", NewTag: "v0.2.0"},
	}
	raw, err := fn.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var verified []string
	r := &Repo{Verify: func(ref string) error { verified = append(verified, ref); return nil }}
	if err := r.verifySigned(raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"registry.example.com/team/memcached-operator@" + digest, "registry.example.com/team/set-image-replicas@" + digest}
	if !slices.Equal(verified, want) {
		t.Errorf("verified %v, want %v", verified, want)
	}

	unsigned := errors.New("no signature")
	r.Verify = func(string) error { return unsigned }
	if err := r.verifySigned(raw); !errors.Is(err, unsigned) {
		t.Errorf("an unsigned digest gave %v, want the verifier's error", err)
	}
}
