// Package kpt performs the exchange `kpt fn render` has with an exec
// function, for tests on machines where kpt itself cannot be installed: the
// package is read with the same kyaml reader kpt uses (path and index
// annotations), sent as one ResourceList with the mutator's configPath file
// as functionConfig, and the returned items are written back to their files
// only when the function exits 0.
package kpt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Result of running one mutator.
type Result struct {
	ExitCode int
	Items    []*yaml.RNode
	Results  *yaml.RNode // the ResourceList's results, nil when there are none
	Stderr   string
}

// Render runs every exec mutator of pkg's Kptfile in order, with the given
// binary standing in for each `exec:` path, and stops at the first failure.
func Render(pkg, binary string) ([]Result, error) {
	kptfile, err := yaml.ReadFile(filepath.Join(pkg, "Kptfile"))
	if err != nil {
		return nil, err
	}
	mutators, err := kptfile.Pipe(yaml.Lookup("pipeline", "mutators"))
	if err != nil || mutators == nil {
		return nil, fmt.Errorf("%s/Kptfile has no pipeline.mutators", pkg)
	}
	elems, err := mutators.Elements()
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, m := range elems {
		if m.Field("exec") == nil {
			return out, fmt.Errorf("only exec mutators can run here: %s", m.MustString())
		}
		configPath, err := m.Pipe(yaml.Lookup("configPath"))
		if err != nil || configPath == nil {
			return out, fmt.Errorf("mutator without configPath: %s", m.MustString())
		}
		r, err := RunMutator(pkg, binary, filepath.Join(pkg, configPath.YNode().Value))
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if r.ExitCode != 0 {
			break
		}
	}
	return out, nil
}

// RunMutator runs one exec function on pkg with the given functionConfig file.
func RunMutator(pkg, binary, configFile string) (Result, error) {
	fnConfig, err := yaml.ReadFile(configFile)
	if err != nil {
		return Result{}, err
	}
	// kpt includes the Kptfile; kyaml's reader only reads *.yaml/*.yml by
	// default, so it is added explicitly.
	reader := &kio.LocalPackageReader{PackagePath: pkg, PreserveSeqIndent: true, MatchFilesGlob: []string{"*.yaml", "*.yml", "Kptfile"}}
	items, err := reader.Read()
	if err != nil {
		return Result{}, err
	}
	var in bytes.Buffer
	if err := (&kio.ByteWriter{
		Writer: &in, KeepReaderAnnotations: true, FunctionConfig: fnConfig,
		WrappingKind: kio.ResourceListKind, WrappingAPIVersion: kio.ResourceListAPIVersion,
	}).Write(items); err != nil {
		return Result{}, err
	}

	cmd := exec.Command(binary)
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	res := Result{}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return res, err
		}
		res.ExitCode = exit.ExitCode()
	}
	res.Stderr = stderr.String()
	rw := &kio.ByteReader{Reader: strings.NewReader(stdout.String()), PreserveSeqIndent: true}
	if res.Items, err = rw.Read(); err != nil {
		return res, fmt.Errorf("function output is not a ResourceList: %w\n%s%s", err, stdout.String(), stderr.String())
	}
	res.Results = rw.Results
	if res.ExitCode == 0 {
		if err := (kio.LocalPackageWriter{PackagePath: pkg}).Write(res.Items); err != nil {
			return res, err
		}
	}
	return res, nil
}

// CopyPackage copies a package directory (not recursive: overlays have no
// subpackages) so a test can render it without touching the repository.
func CopyPackage(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
