// Command pins keeps the overlays' image and replica pins (package
// hack/pins); the Makefile's pin, promote, retarget, kpt-render, render,
// deploy and release targets run it:
//
//	pins pin [-resolve] [-replicas "Kind/name=count ..."] ENV [IMAGE...]
//	pins promote FROM TO
//	pins retarget REGISTRY
//	pins render [ENV...]                  kpt fn render of the overlays' pins (all when none)
//	pins manifests [-img IMAGE] ENV       the overlay as kustomize builds it, the manager on IMAGE
//	pins release -registry R -version V -digest D [-env ENV [-tag]] [-out dist/install.yaml]
//	pins diff [-base REF] [ENV...]        what the working tree changes in each overlay's objects since REF
//
// -C DIR runs it on another checkout (default: the current directory).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/example/memcached-operator/hack/internal/kustomize"
	"github.com/example/memcached-operator/hack/pins"
)

const usage = `usage: pins [-C DIR] pin [-resolve] [-replicas "Kind/name=count ..."] ENV [IMAGE...]
       pins [-C DIR] promote FROM TO
       pins [-C DIR] retarget REGISTRY
       pins [-C DIR] render [ENV...]
       pins [-C DIR] manifests [-img IMAGE] ENV
       pins [-C DIR] release -registry R -version V -digest sha256:... [-env ENV [-tag]] [-out FILE]
       pins [-C DIR] diff [-base REF] [ENV...]`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pins:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	global := flag.NewFlagSet("pins", flag.ContinueOnError)
	root := global.String("C", ".", "the checkout whose overlays/ are pinned")
	if err := global.Parse(args); err != nil {
		return err
	}
	args = global.Args()
	if len(args) == 0 {
		return errors.New(usage)
	}
	// Absolute, since kpt refuses a relative PATH entry for bin/.
	if abs, err := filepath.Abs(*root); err == nil {
		*root = abs
	}
	// Progress to stderr: `pins manifests` prints manifests on stdout.
	repo := &pins.Repo{Root: *root, Log: os.Stderr}
	fs := flag.NewFlagSet("pins "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "pin":
		resolve := fs.Bool("resolve", false, "pin each image given by tag by the digest its registry serves")
		replicas := fs.String("replicas", "", "replica pins: Kind/name=count, space-separated")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() < 1 {
			return errors.New(usage)
		}
		return repo.Pin(fs.Arg(0), fs.Args()[1:], strings.Fields(*replicas), *resolve)
	case "promote":
		if len(args) != 3 {
			return errors.New(usage)
		}
		if os.Getenv("DIGEST") != "" {
			return errors.New("DIGEST is not taken: promotion resolves each tag's digest from its registry")
		}
		return repo.Promote(args[1], args[2])
	case "retarget":
		if len(args) != 2 || args[1] == "" {
			return errors.New("retarget needs REGISTRY, such as ghcr.io/you or localhost:5000")
		}
		return repo.Retarget(args[1])
	case "render":
		envs := args[1:]
		if len(envs) == 0 {
			var err error
			if envs, err = repo.Overlays(); err != nil {
				return err
			}
		}
		for _, env := range envs {
			if err := repo.Render(env); err != nil {
				return err
			}
		}
		return nil
	case "manifests":
		img := fs.String("img", "", "the manager image to run instead of the overlay's pin: repository:tag[@digest]")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New(usage)
		}
		out, err := repo.Manifests(fs.Arg(0), *img)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	case "diff":
		base := fs.String("base", "HEAD", "the Git ref to compare the working tree with")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		_, err := repo.Diff(os.Stdout, *base, fs.Args())
		return err
	case "release":
		registry := fs.String("registry", "", "the registry the release was pushed to")
		version := fs.String("version", "", "the release version, such as v0.2.0")
		digest := fs.String("digest", "", "the manager image's digest, as the registry serves it")
		env := fs.String("env", "", "an environment to pin to the release")
		out := fs.String("out", "dist/install.yaml", "the release manifest to write")
		tag := fs.Bool("tag", false, "commit the pins of -env and tag that commit with -version")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *registry == "" || *version == "" || *digest == "" {
			return errors.New(usage)
		}
		if *tag && *env == "" {
			return errors.New("release -tag needs -env: the tag marks the commit that pins that environment to the release")
		}
		base, err := kustomize.BuildYAML(filepath.Join(*root, "deploy", "base"))
		if err != nil {
			return err
		}
		if !filepath.IsAbs(*out) {
			*out = filepath.Join(*root, *out)
		}
		manifest, err := repo.ReleaseManifest(base, *registry, *version, *digest)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(*out, manifest, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "release: wrote %s (kubectl apply --server-side -f %s)\n", *out, *out)
		if *env == "" {
			return nil
		}
		ref := *registry + "/memcached-operator:" + *version + "@" + *digest
		if err := repo.Pin(*env, []string{ref}, nil, false); err != nil {
			return err
		}
		if !*tag {
			return nil
		}
		return repo.TagRelease(*env, *version, ref)
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
