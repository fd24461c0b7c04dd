// Command image builds, pushes and resolves the repository's container
// images without a container runtime (see package image).
//
//	image build  --component manager --version v0.2.0 --out dist/images/manager
//	image push   --layout dist/images/manager --ref localhost:5000/memcached-operator:v0.2.0
//	image digest --ref localhost:5000/memcached-operator:v0.2.0
//	image keygen --prefix .work/cosign
//	image sign   --ref localhost:5000/memcached-operator@sha256:... [--layout dist/images/manager]
//	image verify --ref localhost:5000/memcached-operator@sha256:... [--provenance] [--sbom]
//	image verify-release --registry localhost:5000 --version v0.2.0
//
// build reads the commit's revision and time from git (SOURCE_DATE_EPOCH
// overrides the time); push prints REF@DIGEST; digest prints the digest.
// sign, verify and verify-release run cosign (bin/cosign) with the keys
// COSIGN_KEY and COSIGN_PUBLIC_KEY name (see package image's sign.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/example/memcached-operator/hack/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: image build|push|digest|plain-http|keygen|sign|verify|verify-release [flags]")
	}
	fs := flag.NewFlagSet("image "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		component := fs.String("component", "", "manager, set-image-replicas, bundle or catalog")
		version := fs.String("version", "", "version stamped into the binary and the labels")
		source := fs.String("source", "https://github.com/example/memcached-operator", "org.opencontainers.image.source")
		out := fs.String("out", "", "OCI layout directory to write")
		repo := fs.String("repo", ".", "repository root")
		files := fs.String("files", "", "IMAGE_PATH=REPO_PATH,... replacing the component's files (a published catalog's configs)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		c, ok := image.Components[*component]
		if !ok || *version == "" || *out == "" {
			return errors.New("build needs --component (manager, set-image-replicas, bundle or catalog), --version and --out")
		}
		if *files != "" {
			c.Files = map[string]string{}
			for _, f := range strings.Split(*files, ",") {
				dst, src, ok := strings.Cut(f, "=")
				if !ok {
					return fmt.Errorf("--files %s: want IMAGE_PATH=REPO_PATH", f)
				}
				c.Files[dst] = src
			}
		}
		md, err := metadata(*repo, *version, *source)
		if err != nil {
			return err
		}
		start := time.Now()
		b, err := image.Build(context.Background(), *repo, c, md, image.Platforms, os.Stderr)
		if err != nil {
			return err
		}
		if err := image.WriteLayout(*out, b); err != nil {
			return err
		}
		d, err := b.Index.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "image: %s %s (%s, created %s) in %s: %s (%v)\n", c.Name, md.Version, md.Revision, md.Created.UTC().Format(time.RFC3339), *out, d, time.Since(start).Round(time.Millisecond))
		fmt.Println(d)
	case "push":
		layoutDir := fs.String("layout", "", "OCI layout written by image build")
		ref := fs.String("ref", "", "where to push, such as localhost:5000/memcached-operator:v0.2.0")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *layoutDir == "" || *ref == "" {
			return errors.New("push needs --layout and --ref")
		}
		b, err := image.ReadLayout(*layoutDir)
		if err != nil {
			return err
		}
		start := time.Now()
		d, err := image.Push(b, *ref)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "image: pushed %s@%s with %d SBOMs (%v)\n", *ref, d, len(b.SBOMs), time.Since(start).Round(time.Millisecond))
		fmt.Printf("%s@%s\n", *ref, d)
	case "digest":
		ref := fs.String("ref", "", "image reference")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		d, err := image.Digest(*ref)
		if err != nil {
			return err
		}
		fmt.Println(d)
	case "plain-http":
		// For the shell steps whose tools need to be told (helm push
		// --plain-http): exit 0 when the registry may be reached over
		// plain HTTP, as this program's own pushes allow.
		registry := fs.String("registry", "", "registry host[:port]")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if !image.PlainHTTP(*registry) {
			return fmt.Errorf("%s is reached over HTTPS only (plain HTTP only on this machine or a private address)", *registry)
		}
	case "keygen":
		prefix := fs.String("prefix", ".work/cosign", "writes PREFIX.key and PREFIX.pub")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if _, err := os.Stat(*prefix + ".key"); err == nil {
			return fmt.Errorf("%s.key exists: a key pair is never overwritten (delete it first to make another)", *prefix)
		}
		if err := os.MkdirAll(filepath.Dir(*prefix), 0o700); err != nil {
			return err
		}
		if err := image.SignerFromEnv().GenerateKeyPair(*prefix); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "image: wrote the dev key pair %s.key (no password) and %s.pub\n", *prefix, *prefix)
	case "sign":
		ref := fs.String("ref", "", "what to sign, by digest: REPOSITORY@sha256:...")
		layoutDir := fs.String("layout", "", "the OCI layout the image was pushed from: also attest its provenance and SBOMs")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *ref == "" {
			return errors.New("sign needs --ref REPOSITORY@sha256:DIGEST")
		}
		s := image.SignerFromEnv()
		if *layoutDir == "" {
			if err := s.Sign(*ref); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "sign: %s signed\n", *ref)
			return nil
		}
		b, err := image.ReadLayout(*layoutDir)
		if err != nil {
			return err
		}
		return s.SignBuild(b, *ref, os.Stderr)
	case "verify":
		ref := fs.String("ref", "", "what to verify, by digest: REPOSITORY@sha256:...")
		provenance := fs.Bool("provenance", false, "also require a SLSA provenance attestation")
		sbom := fs.Bool("sbom", false, "also require a CycloneDX SBOM attestation on each platform image")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		report := image.SignerFromEnv().VerifyArtifact(image.Artifact{Ref: *ref, Provenance: *provenance, SBOM: *sbom})
		fmt.Println(report)
		return report.Err()
	case "verify-release":
		registry := fs.String("registry", "", "where the release was pushed")
		version := fs.String("version", "", "the release, such as v0.2.0")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *registry == "" || *version == "" {
			return errors.New("verify-release needs --registry and --version")
		}
		s := image.SignerFromEnv()
		failed := 0
		for _, a := range image.ReleaseArtifacts(*registry, *version) {
			report := s.VerifyArtifact(a)
			fmt.Println(report)
			if report.Err() != nil {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d artifacts of %s are not verified by %s", failed, *version, s.PublicKey)
		}
	default:
		return fmt.Errorf("unknown command %q: want build, push, digest, keygen, sign, verify or verify-release", args[0])
	}
	return nil
}

// metadata reads the revision and the commit time from git; the time is
// SOURCE_DATE_EPOCH when set, as reproducible-builds.org specifies.
func metadata(repo, version, source string) (image.Metadata, error) {
	md := image.Metadata{Version: version, Source: source}
	rev, err := git(repo, "rev-parse", "HEAD")
	if err != nil {
		return md, err
	}
	md.Revision = rev
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git(repo, "log", "-1", "--format=%ct"); err != nil {
			return md, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return md, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", epoch, err)
	}
	md.Created = time.Unix(secs, 0).UTC()
	return md, nil
}

func git(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
