// Package docs keeps the documentation true to the repository: every
// relative link in the README and docs/ leads to a file that exists, and
// every `make` target they show is one the Makefile has.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// documents are the Markdown files users read.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs := []string{"README.md", "test/README.md", "krm-functions/set-image-replicas/README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			docs = append(docs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestLinksResolve(t *testing.T) {
	root := repo.MustRoot(t)
	for _, doc := range documents(t, root) {
		text := run.ReadFile(t, filepath.Join(root, doc))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, m[1])
			}
		}
	}
}

var (
	// A make command in code: inline (`make pin ENV=prod`) or in a fenced
	// block, flags such as -s skipped.
	makeCommand = regexp.MustCompile(`(?m)(?:^|[\x60$]\s*|\|\s*)make((?:\s+-[a-zA-Z]+)*)\s+([a-z][a-z0-9-]*)`)
	makeTarget  = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
)

func TestDocumentedMakeTargetsExist(t *testing.T) {
	root := repo.MustRoot(t)
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(run.ReadFile(t, filepath.Join(root, "Makefile")), -1) {
		targets[m[1]] = true
	}
	if len(targets) < 30 {
		t.Fatalf("found only %d targets in the Makefile", len(targets))
	}
	seen := 0
	for _, doc := range documents(t, root) {
		for _, code := range codeOf(run.ReadFile(t, filepath.Join(root, doc))) {
			for _, m := range makeCommand.FindAllStringSubmatch(code, -1) {
				seen++
				if !targets[m[2]] {
					t.Errorf("%s shows `make %s`, and the Makefile has no target %s", doc, m[2], m[2])
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("found only %d make commands in the documents; is the pattern still right?", seen)
	}
}

// codeOf returns the inline code spans and fenced blocks of a Markdown text.
func codeOf(text string) []string {
	var code []string
	fenced := false
	var block strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if fenced {
				code = append(code, block.String())
				block.Reset()
			}
			fenced = !fenced
			continue
		}
		if fenced {
			block.WriteString(line + "\n")
			continue
		}
		for i, part := range strings.Split(line, "`") {
			if i%2 == 1 {
				code = append(code, part)
			}
		}
	}
	return code
}
