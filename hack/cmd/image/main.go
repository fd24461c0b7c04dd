// Command image builds, pushes and resolves the repository's container
// images without a container runtime (see package image).
//
//	image build  --component manager --version v0.2.0 --out dist/images/manager
//	image push   --layout dist/images/manager --ref localhost:5000/memcached-operator:v0.2.0
//	image digest --ref localhost:5000/memcached-operator:v0.2.0
//
// build reads the commit's revision and time from git (SOURCE_DATE_EPOCH
// overrides the time); push prints REF@DIGEST; digest prints the digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
		return errors.New("usage: image build|push|digest [flags]")
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
	default:
		return fmt.Errorf("unknown command %q: want build, push or digest", args[0])
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
