package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	provenancev1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BuildType names how this repository builds an image: bin/image build,
// from a clean commit, Go's toolchain cross-compiling each platform.
const BuildType = "https://github.com/example/memcached-operator/docs/shipping.md#reproducible-images"

// BuilderID names the builder: bin/image, which needs no container runtime.
const BuilderID = "https://github.com/example/memcached-operator/hack/cmd/image"

// Provenance is the SLSA v1 provenance predicate of a component built at
// md from repo: what was asked for (the component, version and
// platforms), what it was built from (the commit, and the hash of every
// go.mod and go.sum that decide its dependencies) and by what (bin/image
// and the Go toolchain that ran it). It holds what a reader needs to
// rebuild the image and compare digests.
func Provenance(repo string, c Component, md Metadata, platforms []v1.Platform, started, finished time.Time) ([]byte, error) {
	built := make([]any, 0, len(platforms))
	for _, p := range platforms {
		built = append(built, p.String())
	}
	external, err := structpb.NewStruct(map[string]any{
		"component": c.Name,
		"version":   md.Version,
		"source":    md.Source,
		"platforms": built,
	})
	if err != nil {
		return nil, err
	}
	internal, err := structpb.NewStruct(map[string]any{
		"SOURCE_DATE_EPOCH": md.Created.Unix(),
		"CGO_ENABLED":       "0",
		"flags":             "-trimpath",
	})
	if err != nil {
		return nil, err
	}
	var deps []*intoto.ResourceDescriptor
	// A local build of something that is no commit (a stand-in image in
	// tests) names no commit.
	if _, err := hex.DecodeString(md.Revision); err == nil && md.Revision != "" {
		deps = append(deps, &intoto.ResourceDescriptor{
			Uri:    "git+" + md.Source + "@" + md.Revision,
			Digest: map[string]string{"gitCommit": md.Revision},
		})
	}
	files, err := moduleFiles(repo)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(repo, f))
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{Name: f, Digest: map[string]string{"sha256": sum}})
	}
	p := &provenancev1.Provenance{
		BuildDefinition: &provenancev1.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   external,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &provenancev1.RunDetails{
			Builder: &provenancev1.Builder{
				Id:      BuilderID,
				Version: map[string]string{"go": runtime.Version()},
			},
			Metadata: &provenancev1.BuildMetadata{
				StartedOn:  timestamppb.New(started),
				FinishedOn: timestamppb.New(finished),
			},
		},
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("provenance of %s: %w", c.Name, err)
	}
	return protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(p)
}

// ProvenanceCommit is the commit a verified provenance predicate says
// the image was built from.
func ProvenanceCommit(predicate []byte) (string, error) {
	var p provenancev1.Provenance
	if err := protojson.Unmarshal(predicate, &p); err != nil {
		return "", fmt.Errorf("the provenance is not SLSA v1: %w", err)
	}
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		if c := d.GetDigest()["gitCommit"]; c != "" {
			return c, nil
		}
	}
	return "", fmt.Errorf("the provenance names no commit among its resolved dependencies")
}

// moduleFiles are the files that decide every Go module's dependencies:
// go.work and each go.mod and go.sum in the repository, tools/ included,
// sorted.
func moduleFiles(repo string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "dist", ".work", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch d.Name() {
		case "go.mod", "go.sum", "go.work", "go.work.sum":
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
