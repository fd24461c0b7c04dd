package ship

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/example/memcached-operator/hack/image"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The Dockerfiles, for users with Docker, build the same images as
// `make docker-build`: the same go build command line (flags, ldflags,
// static), the same user and the same entrypoint. Docker cannot run here,
// so BuildKit's own Dockerfile parser and shell lexer read them.
func TestDockerfilesAgreeWithTheBuilder(t *testing.T) {
	for _, component := range []string{"manager", "set-image-replicas"} {
		t.Run(component, func(t *testing.T) {
			c := image.Components[component]
			path := filepath.Join(repo.MustRoot(t), c.Module, "Dockerfile")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			res, err := parser.Parse(f)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			platform := v1.Platform{OS: "linux", Architecture: "arm64"}
			env := shell.EnvsFromSlice([]string{"VERSION=v9.9.9", "TARGETOS=" + platform.OS, "TARGETARCH=" + platform.Architecture})
			lex := shell.NewLex('\\')

			// built maps each go build's output to its main package;
			// copied, a built output to where the final stage puts it.
			built := map[string]string{}
			var user, entrypoint string
			var copied map[string]string
			var stages int
			for _, n := range res.AST.Children {
				switch strings.ToLower(n.Value) {
				case "from":
					stages++
					user, entrypoint, copied = "", "", map[string]string{}
				case "run":
					cmd := strings.Join(words(n), " ")
					if !strings.Contains(cmd, "go build") {
						continue
					}
					args, err := lex.ProcessWords(cmd, env)
					if err != nil {
						t.Fatal(err)
					}
					i := slices.Index(args, "go")
					out, pkg := args[slices.Index(args, "-o")+1], args[len(args)-1]
					built[out] = pkg
					if want := c.GoBuildArgs(pkg, "v9.9.9", out); !slices.Equal(args[i+1:], want) {
						t.Errorf("RUN go %v,\nthe builder runs go %v", args[i+1:], want)
					}
					for _, kv := range image.GoBuildEnv(platform) {
						if strings.HasPrefix(kv, "CGO_ENABLED=") || strings.HasPrefix(kv, "GOOS=") || strings.HasPrefix(kv, "GOARCH=") {
							if !slices.Contains(args[:i], kv) {
								t.Errorf("RUN go build lacks %s (the builder sets it): %v", kv, args[:i])
							}
						}
					}
				case "user":
					user = strings.Join(words(n), " ")
				case "entrypoint":
					entrypoint = strings.Join(words(n), " ")
					if !n.Attributes["json"] {
						t.Errorf("ENTRYPOINT must be exec form (JSON), as the image's config is")
					}
				case "copy":
					if w := words(n); len(w) == 2 && built[w[0]] != "" {
						copied[w[0]] = w[1]
					}
				}
			}
			if stages < 2 {
				t.Errorf("want a build stage and a runtime stage, got %d stages", stages)
			}
			if user != image.User {
				t.Errorf("final stage USER %q, the image runs as %s", user, image.User)
			}
			if entrypoint != c.Path {
				t.Errorf("final stage ENTRYPOINT %q, the image's is %s", entrypoint, c.Path)
			}
			// Each program is built from its package and copied where the
			// image has it, and nothing else is.
			var want, got []string
			for _, p := range c.Programs() {
				want = append(want, p.Package+" -> "+p.Path)
			}
			for out, to := range copied {
				got = append(got, built[out]+" -> "+to)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("the final stage copies %v, the image holds %v", got, want)
			}
		})
	}
}

// words are an instruction's arguments as the parser split them.
func words(n *parser.Node) []string {
	var out []string
	for a := n.Next; a != nil; a = a.Next {
		out = append(out, a.Value)
	}
	return out
}
