package image

import (
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ParseReference parses an image reference. Plain HTTP is allowed only
// where PlainHTTP says; anything else is reached over TLS with the usual
// ~/.docker/config.json credentials.
func ParseReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		// StrictValidation refuses a reference without a tag or digest;
		// say what is wrong rather than go-containerregistry's terse error.
		r, err = name.ParseReference(ref)
		if err != nil {
			return nil, fmt.Errorf("%q is not an image reference such as registry.example.com/team/image:tag: %w", ref, err)
		}
	}
	if PlainHTTP(r.Context().RegistryStr()) {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

// PlainHTTP says whether a registry (host[:port]) may be reached over
// plain HTTP when HTTPS fails: one on this machine (localhost, a loopback
// address) or at a private address (10/8, 172.16/12, 192.168/16, fc00::/7),
// such as a cluster's own registry, as go-containerregistry allows too.
// A name is never trusted this way: it could resolve anywhere.
func PlainHTTP(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

// RemoteOptions are the options of every registry call: credentials from
// the default keychain (docker config, credential helpers).
func RemoteOptions() []remote.Option {
	return []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// Digest resolves a reference to the digest the registry serves for it.
func Digest(ref string) (v1.Hash, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	desc, err := remote.Head(r, RemoteOptions()...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	return desc.Digest, nil
}

// Push pushes a built index by ref, then each SBOM by digest (the registry
// links them to their images through their subject). It returns the
// index's digest.
func Push(b *Built, ref string) (v1.Hash, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(r, b.Index, RemoteOptions()...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	for _, s := range b.SBOMs {
		d, err := s.Digest()
		if err != nil {
			return v1.Hash{}, err
		}
		if err := remote.Write(r.Context().Digest(d.String()), s, RemoteOptions()...); err != nil {
			return v1.Hash{}, fmt.Errorf("push the SBOM of %s: %w", ref, err)
		}
	}
	return b.Index.Digest()
}
