// Package kpt runs kpt's real `fn render`: bin/kpt, kpt's own render
// command from the newest kpt release the Go module proxy serves
// (tools/kpt). Path resolution of exec functions, the ResourceList
// exchange, writing files back and failing on a function's error are kpt's
// own code.
package kpt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// Steps are the mutators' results in order, from kpt's --results-dir.
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

// StepResult is what one function run produced.
type StepResult struct {
	Stderr   string
	ExitCode int
	Results  []*framework.Result
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
