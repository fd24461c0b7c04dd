package image

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// Signing is cosign's (bin/cosign, the v3 release Flux's source-controller
// links, built from tools/go.mod) with a key pair and no public-good
// infrastructure: no Fulcio certificate, no Rekor transparency log, no TUF
// root from the CDN. cosign v3 writes each signature and attestation as a
// sigstore bundle attached to the signed digest as an OCI 1.1 referrer.
// That is the format source-controller tries first (cosign.GetBundles) and
// the one cosign verify reads; the tag scheme (sha256-DIGEST.sig) is only
// its fallback for images signed before bundles.
//
// The private key comes from a file or an environment variable, in
// cosign's own spellings (a path, or env://VAR), and its password from
// COSIGN_PASSWORD (empty for make keygen's dev key). The public key is a
// file.

// Predicate types of the attestations a release attaches (cosign's names).
const (
	ProvenanceType = "slsaprovenance1" // https://slsa.dev/provenance/v1
	SBOMType       = "cyclonedx"       // https://cyclonedx.org/bom
)

// The environment variables that name the keys, for make and the tools.
const (
	PrivateKeyEnv = "COSIGN_KEY"
	PublicKeyEnv  = "COSIGN_PUBLIC_KEY"
)

// offlineSigningConfig tells cosign sign to use no certificate authority,
// no transparency log and no timestamp authority: the signature is the
// key's alone.
const offlineSigningConfig = `{"mediaType":"application/vnd.dev.sigstore.signingconfig.v0.2+json","caUrls":[],"oidcUrls":[],"rekorTlogUrls":[],"tsaUrls":[],"rekorTlogConfig":{"selector":"ANY"},"tsaConfig":{"selector":"ANY"}}`

// offlineTrustedRoot trusts no certificate authority and no log, so that
// cosign does not fetch the public-good root over TUF; the key is the
// only trust.
const offlineTrustedRoot = `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`

// Signer signs and verifies artifacts by digest with cosign.
type Signer struct {
	// Cosign is the cosign binary.
	Cosign string
	// PrivateKey signs: a file, or env://VAR. Needed by Sign and Attest.
	PrivateKey string
	// PublicKey verifies: a file. Needed by Verify and VerifyAttestation.
	PublicKey string
}

// SignerFromEnv is a Signer with the keys COSIGN_KEY and COSIGN_PUBLIC_KEY
// name and the cosign binary beside this executable (bin/).
func SignerFromEnv() Signer {
	s := Signer{Cosign: "cosign", PrivateKey: os.Getenv(PrivateKeyEnv), PublicKey: os.Getenv(PublicKeyEnv)}
	if exe, err := os.Executable(); err == nil {
		if beside := filepath.Join(filepath.Dir(exe), "cosign"); isFile(beside) {
			s.Cosign = beside
		}
	}
	return s
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// byDigest parses ref and requires a digest: a tag can move after it was
// signed, so only a digest is ever signed or verified.
func byDigest(ref string) (name.Digest, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	d, ok := r.(name.Digest)
	if !ok {
		return name.Digest{}, fmt.Errorf("%s: sign and verify by digest (REPOSITORY@sha256:...), not by tag: a tag can move after it is signed", ref)
	}
	return d, nil
}

// Sign signs the digest ref names.
func (s Signer) Sign(ref string) error {
	d, err := byDigest(ref)
	if err != nil {
		return err
	}
	if s.PrivateKey == "" {
		return fmt.Errorf("sign %s: no private key: set %s to a key file or env://VAR (make keygen writes a dev key pair to .work/)", ref, PrivateKeyEnv)
	}
	_, err = s.run(d, "sign", "--yes", "--key", s.PrivateKey)
	return err
}

// Attest attaches predicate, of cosign's predicateType, to the digest ref
// names as a signed in-toto statement.
func (s Signer) Attest(ref, predicateType string, predicate []byte) error {
	d, err := byDigest(ref)
	if err != nil {
		return err
	}
	if s.PrivateKey == "" {
		return fmt.Errorf("attest %s: no private key: set %s to a key file or env://VAR (make keygen writes a dev key pair to .work/)", ref, PrivateKeyEnv)
	}
	dir, err := os.MkdirTemp("", "predicate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "predicate.json")
	if err := os.WriteFile(file, predicate, 0o600); err != nil {
		return err
	}
	_, err = s.run(d, "attest", "--yes", "--key", s.PrivateKey, "--type", predicateType, "--predicate", file)
	return err
}

// ErrUnverified is wrapped by every verification that found no valid
// signature or attestation from the key.
var ErrUnverified = errors.New("not verified")

// Verify checks that the digest ref names carries a signature the public
// key verifies.
func (s Signer) Verify(ref string) error {
	d, err := byDigest(ref)
	if err != nil {
		return err
	}
	if s.PublicKey == "" {
		return fmt.Errorf("verify %s: no public key: set %s to the release key's public half", ref, PublicKeyEnv)
	}
	if _, err := s.run(d, "verify", "--key", s.PublicKey, "--insecure-ignore-tlog"); err != nil {
		return fmt.Errorf("%s (digest %s) has no signature from %s: %w: %w", d.Context().Name(), d.DigestStr(), s.PublicKey, ErrUnverified, err)
	}
	return nil
}

// Statement is the part of a verified in-toto statement a reader needs.
type Statement struct {
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// VerifyAttestation checks that the digest ref names carries an
// attestation of predicateType the public key verifies, and returns its
// statement.
func (s Signer) VerifyAttestation(ref, predicateType string) (Statement, error) {
	d, err := byDigest(ref)
	if err != nil {
		return Statement{}, err
	}
	if s.PublicKey == "" {
		return Statement{}, fmt.Errorf("verify %s: no public key: set %s to the release key's public half", ref, PublicKeyEnv)
	}
	out, err := s.run(d, "verify-attestation", "--key", s.PublicKey, "--insecure-ignore-tlog", "--type", predicateType)
	if err != nil {
		return Statement{}, fmt.Errorf("%s (digest %s) has no %s attestation from %s: %w: %w", d.Context().Name(), d.DigestStr(), predicateType, s.PublicKey, ErrUnverified, err)
	}
	// cosign prints each verified DSSE envelope on a line; its payload is
	// the statement.
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var envelope struct {
			Payload string `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &envelope) != nil || envelope.Payload == "" {
			continue
		}
		payload, err := base64.StdEncoding.DecodeString(envelope.Payload)
		if err != nil {
			return Statement{}, fmt.Errorf("%s: cosign printed an envelope whose payload is not base64: %w", ref, err)
		}
		var st Statement
		if err := json.Unmarshal(payload, &st); err != nil {
			return Statement{}, fmt.Errorf("%s: the attestation's payload is no in-toto statement: %w", ref, err)
		}
		return st, nil
	}
	return Statement{}, fmt.Errorf("%s: cosign verified the %s attestation but printed no statement", ref, predicateType)
}

// run runs cosign on d with the offline trust configuration and returns
// its standard output.
func (s Signer) run(d name.Digest, args ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "cosign-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "trusted-root.json")
	if err := os.WriteFile(root, []byte(offlineTrustedRoot), 0o600); err != nil {
		return nil, err
	}
	args = append(args, "--trusted-root", root)
	if args[0] == "sign" || args[0] == "attest" {
		config := filepath.Join(dir, "signing-config.json")
		if err := os.WriteFile(config, []byte(offlineSigningConfig), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--signing-config", config)
	}
	if PlainHTTP(d.Context().RegistryStr()) {
		args = append(args, "--allow-http-registry")
	}
	args = append(args, d.String())
	cmd := exec.Command(s.Cosign, args...)
	// cosign would ask a terminal for the key's password; make keygen's
	// key has none.
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+os.Getenv("COSIGN_PASSWORD"), "COSIGN_YES=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cosign %s: %w: %s", args[0], err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// lastLine is cosign's error: the last line it printed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// GenerateKeyPair writes a key pair with an empty password to
// prefix.key and prefix.pub, as make keygen does.
func (s Signer) GenerateKeyPair(prefix string) error {
	cmd := exec.Command(s.Cosign, "generate-key-pair", "--output-key-prefix", prefix)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cosign generate-key-pair: %w: %s", err, out)
	}
	return nil
}

// SignBuild signs a build pushed as ref (by digest) and attests it: the
// index gets the signature and the build's SLSA provenance, each platform
// image the CycloneDX SBOM of its binary (the same document its SBOM
// referrer holds, here signed). progress gets a line per artifact.
func (s Signer) SignBuild(b *Built, ref string, progress io.Writer) error {
	d, err := byDigest(ref)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := s.Sign(d.String()); err != nil {
		return err
	}
	if err := s.Attest(d.String(), ProvenanceType, b.Provenance); err != nil {
		return err
	}
	fmt.Fprintf(progress, "sign: %s signed, provenance attested (%v)\n", d, time.Since(start).Round(time.Millisecond))
	for _, sbom := range b.SBOMs {
		m, err := sbom.Manifest()
		if err != nil {
			return err
		}
		if m.Subject == nil || len(m.Layers) != 1 {
			return fmt.Errorf("an SBOM of %s has no subject or not one document", ref)
		}
		layer, err := sbom.LayerByDigest(m.Layers[0].Digest)
		if err != nil {
			return err
		}
		rc, err := layer.Uncompressed()
		if err != nil {
			return err
		}
		doc, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return err
		}
		platform := d.Context().Digest(m.Subject.Digest.String()).String()
		if err := s.Attest(platform, SBOMType, doc); err != nil {
			return err
		}
		fmt.Fprintf(progress, "sign: %s SBOM attested (%v)\n", platform, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
