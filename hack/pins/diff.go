package pins

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/example/memcached-operator/hack/internal/kustomize"
)

// DiffSummary counts what a change does to one environment.
type DiffSummary struct {
	Env                     string
	Added, Removed, Changed int
}

// Diff renders each environment's overlay as it is at the Git ref base and
// as it is in the working tree, and writes to w, per environment and
// object, what the change would do: `+` an object the change adds, `-` one
// it removes, `~` one it changes, with a unified diff of its YAML. It is
// what a reviewer needs of a pull request that touches deploy/ or
// overlays/, before Argo CD or Flux applies it.
func (r *Repo) Diff(w io.Writer, base string, envs []string) ([]DiffSummary, error) {
	if len(envs) == 0 {
		var err error
		if envs, err = r.Overlays(); err != nil {
			return nil, err
		}
	}
	old, err := os.MkdirTemp("", "pins-diff-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(old)
	if err := r.checkout(base, old); err != nil {
		return nil, err
	}
	var summaries []DiffSummary
	for _, env := range envs {
		if _, err := r.overlay(env); err != nil {
			return nil, err
		}
		before, err := renderedObjects(filepath.Join(old, "overlays", env))
		if err != nil {
			return nil, fmt.Errorf("overlays/%s at %s: %w", env, base, err)
		}
		after, err := renderedObjects(filepath.Join(r.Root, "overlays", env))
		if err != nil {
			return nil, fmt.Errorf("overlays/%s in the working tree: %w", env, err)
		}
		s := DiffSummary{Env: env}
		fmt.Fprintf(w, "== %s (overlays/%s: %s -> working tree)\n", env, env, base)
		for _, id := range unionKeys(before, after) {
			b, inBefore := before[id]
			a, inAfter := after[id]
			switch {
			case !inBefore:
				s.Added++
				fmt.Fprintf(w, "+ %s\n", id)
			case !inAfter:
				s.Removed++
				fmt.Fprintf(w, "- %s\n", id)
			case a != b:
				s.Changed++
				text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
					A: difflib.SplitLines(b), B: difflib.SplitLines(a),
					FromFile: base, ToFile: "working tree", Context: 2,
				})
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(w, "~ %s\n%s", id, indent(text))
			}
		}
		fmt.Fprintf(w, "%s: %d added, %d removed, %d changed\n", env, s.Added, s.Removed, s.Changed)
		summaries = append(summaries, s)
	}
	return summaries, nil
}

// checkout writes the tree of ref into dir, with `git archive`, so that the
// working tree and its index stay as they are.
func (r *Repo) checkout(ref, dir string) error {
	cmd := exec.Command("git", "-C", r.Root, "archive", "--format=tar", ref)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive %s: %w: %s (BASE must be a commit, branch or tag of this repository)", ref, err, strings.TrimSpace(stderr.String()))
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("git archive %s: %s is outside the tree", ref, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, path); err != nil {
				return err
			}
		}
	}
}

// renderedObjects builds a kustomization and keys each object's YAML by
// group/Kind namespace/name.
func renderedObjects(dir string) (map[string]string, error) {
	nodes, err := kustomize.Build(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[objectID(n)] = n.MustString()
	}
	return out, nil
}

func objectID(n *yaml.RNode) string {
	kind := n.GetKind()
	if group, _, ok := strings.Cut(n.GetApiVersion(), "/"); ok {
		kind = group + "/" + kind
	}
	name := n.GetName()
	if ns := n.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return kind + " " + name
}

func unionKeys(a, b map[string]string) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func indent(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	return b.String()
}
