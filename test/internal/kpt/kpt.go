// Package kpt runs kpt's real `fn render` and encodes what kpt's current
// source does beyond its newest release.
//
// bin/kpt is `kpt fn render` from the newest kpt release the Go module proxy
// serves (tools/kpt): path resolution of exec functions, the ResourceList
// exchange, writing files back, failing on a function's error are kpt's own
// code. kpt's current source (github.com/kptdev/kpt at 23c57d7, newer than
// any release the proxy serves) also rewrites the root Kptfile after every
// render: it decodes it into its Go types (dropping comments), sets a
// status.conditions entry of type Rendered and status.renderStatus with one
// step per function (pkg/lib/kptops/render_executor.go: updateRenderStatus,
// setRenderStatus, captureStepResult), and writes it back with kyaml's
// encoder and wide sequence indentation (pkg/kptfile/kptfileutil/util.go:
// marshalKptfile). HeadKptfile reproduces that rewrite, field for field and
// in the same order, so tests can check that the committed Kptfiles are
// already in that form and a render by kpt's current source leaves a clean
// tree clean.
package kpt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/test/internal/repo"
)

// Rendered is what one `kpt fn render` run did.
type Rendered struct {
	ExitCode int
	// Output is kpt's stdout and stderr.
	Output string
	// Steps are the mutators' results in order, from kpt's --results-dir,
	// as kpt's current source records them in the Kptfile.
	Steps []StepResult
}

// Render runs `bin/kpt fn render PKG --allow-exec` in dir with PATH
// starting with extraPath (where exec functions named without a path are
// looked up), as a user types it.
func Render(dir, pkg string, extraPath ...string) (Rendered, error) {
	bins, err := repo.Bin("kpt")
	if err != nil {
		return Rendered{}, err
	}
	results, err := os.MkdirTemp("", "kpt-results-")
	if err != nil {
		return Rendered{}, err
	}
	defer func() { _ = os.RemoveAll(results) }()
	cmd := exec.Command(bins["kpt"], "fn", "render", pkg, "--allow-exec", "--results-dir", results)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if len(extraPath) > 0 {
		cmd.Env = append(cmd.Env, "PATH="+strings.Join(append(extraPath, os.Getenv("PATH")), string(os.PathListSeparator)))
	}
	out, err := cmd.CombinedOutput()
	r := Rendered{Output: string(out)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.ExitCode = exit.ExitCode()
	case err != nil:
		return r, err
	}
	raw, err := os.ReadFile(filepath.Join(results, "results.yaml"))
	if err != nil {
		return r, nil // kpt failed before it ran a function
	}
	var list struct {
		Items []struct {
			Image    string              `yaml:"image,omitempty"`
			Exec     string              `yaml:"exec,omitempty"`
			Stderr   string              `yaml:"stderr,omitempty"`
			ExitCode int                 `yaml:"exitCode"`
			Results  []*framework.Result `yaml:"results,omitempty"`
		} `yaml:"items"`
	}
	if err := yaml.Unmarshal(raw, &list); err != nil {
		return r, fmt.Errorf("kpt's results.yaml: %w", err)
	}
	for _, it := range list.Items {
		r.Steps = append(r.Steps, StepResult{Stderr: it.Stderr, ExitCode: it.ExitCode, Results: it.Results})
	}
	return r, nil
}

// The Kptfile as kpt's current source decodes and encodes it: the fields
// and their order are those of its api/kptfile/v1 types; fields this
// repository's Kptfiles do not use (upstream, upstreamLock, info,
// inventory) make HeadKptfile fail rather than be guessed at.
type kptfile struct {
	yaml.ResourceMeta `yaml:",inline"`
	Pipeline          *pipeline `yaml:"pipeline,omitempty"`
	Status            *status   `yaml:"status,omitempty"`
}

type pipeline struct {
	Mutators   []function `yaml:"mutators,omitempty"`
	Validators []function `yaml:"validators,omitempty"`
}

type function struct {
	Image      string            `yaml:"image,omitempty"`
	Exec       string            `yaml:"exec,omitempty"`
	ConfigPath string            `yaml:"configPath,omitempty"`
	ConfigMap  map[string]string `yaml:"configMap,omitempty"`
	Name       string            `yaml:"name,omitempty"`
}

type status struct {
	Conditions   []condition   `yaml:"conditions,omitempty"`
	RenderStatus *renderStatus `yaml:"renderStatus,omitempty"`
}

type condition struct {
	Type    string `yaml:"type"`
	Status  string `yaml:"status"`
	Reason  string `yaml:"reason,omitempty"`
	Message string `yaml:"message,omitempty"`
}

type renderStatus struct {
	MutationSteps   []pipelineStepResult `yaml:"mutationSteps,omitempty"`
	ValidationSteps []pipelineStepResult `yaml:"validationSteps,omitempty"`
	ErrorSummary    string               `yaml:"errorSummary,omitempty"`
}

type pipelineStepResult struct {
	Name           string              `yaml:"name,omitempty"`
	Image          string              `yaml:"image,omitempty"`
	ExecPath       string              `yaml:"exec,omitempty"`
	ExecutionError string              `yaml:"executionError,omitempty"`
	Stderr         string              `yaml:"stderr,omitempty"`
	ExitCode       int                 `yaml:"exitCode"`
	Results        []*framework.Result `yaml:"results,omitempty"`
	ErrorResults   []*framework.Result `yaml:"errorResults,omitempty"`
}

// StepResult is what one function run produced.
type StepResult struct {
	Stderr   string
	ExitCode int
	Results  []*framework.Result
}

// HeadKptfile returns the Kptfile as kpt's current source writes it after a
// successful render whose mutators produced steps (one per mutator, in
// order).
func HeadKptfile(in []byte, steps []StepResult) ([]byte, error) {
	kf := &kptfile{}
	dec := yaml.NewDecoder(bytes.NewReader(in))
	dec.KnownFields(true) // as kptfileutil.DecodeKptfile
	if err := dec.Decode(kf); err != nil {
		return nil, fmt.Errorf("decode the Kptfile as kpt does: %w", err)
	}
	if kf.Status == nil {
		kf.Status = &status{}
	}
	kf.Status.Conditions = slices.DeleteFunc(kf.Status.Conditions, func(c condition) bool { return c.Type == "Rendered" })
	kf.Status.Conditions = append(kf.Status.Conditions, condition{Type: "Rendered", Status: "True", Reason: "RenderSuccess"})
	kf.Status.RenderStatus = nil
	if kf.Pipeline != nil && len(kf.Pipeline.Mutators) > 0 {
		if len(steps) != len(kf.Pipeline.Mutators) {
			return nil, fmt.Errorf("%d step results for %d mutators", len(steps), len(kf.Pipeline.Mutators))
		}
		rs := &renderStatus{}
		for i, fn := range kf.Pipeline.Mutators {
			step := pipelineStepResult{Name: fn.Name, Image: fn.Image, ExecPath: fn.Exec,
				Stderr: steps[i].Stderr, ExitCode: steps[i].ExitCode, Results: steps[i].Results}
			for _, r := range step.Results {
				if r.Severity == framework.Error {
					step.ErrorResults = append(step.ErrorResults, r)
				}
			}
			rs.MutationSteps = append(rs.MutationSteps, step)
		}
		kf.Status.RenderStatus = rs
	}
	return yaml.MarshalWithOptions(kf, &yaml.EncoderOptions{SeqIndent: yaml.WideSequenceStyle})
}

// CopyPackage copies a package directory tree so a test can render it
// without touching the repository.
func CopyPackage(from, to string) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
}
