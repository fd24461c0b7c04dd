// Package helm proves the generated Helm chart (deploy/helm/memcached-
// operator, from hack/chart) with Helm's own v4 SDK and CLI: it renders
// exactly the kustomize install, passes strict lint, rejects values its
// schema forbids with Helm's messages, and installs, upgrades, rolls back
// and uninstalls on a kwok cluster, from the directory and from an OCI
// registry.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/hack/chart"
	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/helmtemplate"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// The release the comparisons render: the names `make deploy` uses.
const (
	releaseName = "memcached-operator"
	namespace   = names.OperatorNamespace
)

func chartDir(t testing.TB) string { return helmtemplate.Dir(t) }

func load(t testing.TB, dir string) *chartv2.Chart { return helmtemplate.Load(t, dir) }

// template renders the chart as `helm template` does.
func template(c *chartv2.Chart, values map[string]any) (*releasev1.Release, error) {
	return helmtemplate.Template(c, releaseName, namespace, values)
}

// object is a parsed manifest, keyed by what identifies it in a cluster.
type object = map[string]any

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", o["kind"], md["namespace"], md["name"])
}

func parse(t testing.TB, manifests string) map[string]object {
	t.Helper()
	out := map[string]object{}
	r := utilyaml.NewYAMLReader(bufioReader(manifests))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := sigsyaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("parse %s: %v", doc, err)
		}
		if o == nil {
			continue
		}
		out[key(o)] = o
	}
	return out
}

// kustomizeInstall is `kustomize build deploy/base` without the Namespace,
// which Helm does not own (helm install --create-namespace).
func kustomizeInstall(t testing.TB) map[string]object {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repo.MustRoot(t), "deploy", "base"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objects := parse(t, string(raw))
	for k, o := range objects {
		if o["kind"] == "Namespace" {
			delete(objects, k)
		}
	}
	return objects
}

// withoutHelmMetadata drops the labels Helm charts add by convention
// (chart.HelmLabels) and Helm's own annotations (chart.HelmAnnotations),
// and nothing else.
func withoutHelmMetadata(o object) object {
	md, _ := o["metadata"].(map[string]any)
	for field, keys := range map[string][]string{"labels": chart.HelmLabels, "annotations": chart.HelmAnnotations} {
		m, _ := md[field].(map[string]any)
		for _, k := range keys {
			delete(m, k)
		}
		if m != nil && len(m) == 0 {
			delete(md, field)
		}
	}
	return o
}

// differences lists how the chart's objects differ from the kustomize
// install's, object for object and field for field.
func differences(chartObjects, kustomizeObjects map[string]object) []string {
	var diffs []string
	for k, want := range kustomizeObjects {
		got, ok := chartObjects[k]
		if !ok {
			diffs = append(diffs, "the chart lacks "+k)
			continue
		}
		diffs = append(diffs, fieldDiffs(k, "", withoutHelmMetadata(got), want)...)
	}
	for k := range chartObjects {
		if _, ok := kustomizeObjects[k]; !ok {
			diffs = append(diffs, "the chart adds "+k)
		}
	}
	sort.Strings(diffs)
	return diffs
}

func fieldDiffs(obj, path string, got, want any) []string {
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		var out []string
		for k := range merged(gm, wm) {
			out = append(out, fieldDiffs(obj, path+"."+k, gm[k], wm[k])...)
		}
		return out
	}
	gl, gok := got.([]any)
	wl, wok := want.([]any)
	if gok && wok && len(gl) == len(wl) {
		var out []string
		for i := range gl {
			out = append(out, fieldDiffs(obj, fmt.Sprintf("%s[%d]", path, i), gl[i], wl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := sigsyaml.Marshal(got)
		w, _ := sigsyaml.Marshal(want)
		return []string{fmt.Sprintf("%s %s: chart has %s, kustomize has %s", obj, path, strings.TrimSpace(string(g)), strings.TrimSpace(string(w)))}
	}
	return nil
}

func merged(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// With default values the chart renders the kustomize install, object for
// object and field for field, but for chart.HelmLabels and
// chart.HelmAnnotations; its only hooks are
// the uninstall ones. A hand edit to a template is caught.
func TestChartEqualsKustomize(t *testing.T) {
	want := kustomizeInstall(t)
	check := func(t *testing.T, dir string) []string {
		r, err := template(load(t, dir), nil)
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		for _, h := range r.Hooks {
			if !strings.HasPrefix(h.Path, chart.Name+"/templates/uninstall/") {
				t.Errorf("unexpected hook %s (%s)", h.Name, h.Path)
			}
		}
		return differences(parse(t, r.Manifest), want)
	}
	if diffs := check(t, chartDir(t)); len(diffs) > 0 {
		t.Errorf("the chart and deploy/base differ (regenerate with `make helm-chart`):\n%s", strings.Join(diffs, "\n"))
	}
	if len(want) < 15 {
		t.Errorf("the kustomize install has only %d objects", len(want))
	}

	t.Run("a hand edit is caught", func(t *testing.T) {
		dir := copyChart(t)
		edit(t, filepath.Join(dir, "templates", "manager", "deployment-controller-manager.yaml"), "--kube-api-qps=100", "--kube-api-qps=50")
		diffs := check(t, dir)
		if len(diffs) != 1 || !strings.Contains(diffs[0], "Deployment memcached-operator-system/memcached-operator-controller-manager .spec.template.spec.containers[0].args[4]: chart has --kube-api-qps=50") {
			t.Fatalf("want the edited Deployment reported, got %q", diffs)
		}
	})
}

// Helm's lint in strict mode (warnings are errors) passes; a broken
// chart fails it.
func TestChartLintsStrict(t *testing.T) {
	lint := func(dir string) *action.LintResult {
		l := action.NewLint()
		l.Strict, l.Namespace, l.KubeVersion = true, namespace, helmtemplate.KubeVersion
		return l.Run([]string{dir}, nil)
	}
	r := lint(chartDir(t))
	for _, m := range r.Messages {
		t.Logf("lint: %s", m)
	}
	if len(r.Errors) > 0 || action.HasWarningsOrErrors(r) {
		t.Errorf("helm lint --strict: %v", r.Errors)
	}

	t.Run("a broken chart fails", func(t *testing.T) {
		dir := copyChart(t)
		edit(t, filepath.Join(dir, "Chart.yaml"), "\nversion: ", "\nxversion: ")
		if r := lint(dir); len(r.Errors) == 0 {
			t.Fatal("lint passed a Chart.yaml without a version")
		}
	})
}

// Values the schema forbids are rejected with Helm's message naming the
// field, before anything is rendered; so are combinations the schema
// cannot express.
func TestValuesAreValidated(t *testing.T) {
	c := load(t, chartDir(t))
	for _, tc := range []struct {
		name   string
		values string
		want   []string
	}{
		{"a string for a number", "manager: {replicas: two}", []string{"values don't meet the specifications of the schema", "/manager/replicas", "got string, want integer"}},
		{"an unknown pull policy", "image: {pullPolicy: Sometimes}", []string{"values don't meet the specifications of the schema", "/image/pullPolicy", "Always"}},
		{"a misspelt knob", "manager: {replica: 2}", []string{"values don't meet the specifications of the schema", "replica"}},
		{"a digest that is not one", "image: {digest: latest}", []string{"/image/digest"}},
		{"replicas without a leader", "manager: {replicas: 2, leaderElection: false}", []string{"manager.replicas > 1 needs manager.leaderElection: true"}},
		{"a CA namespace that is not a name", "certManager: {caIssuer: {enabled: true, namespace: Cache}}", []string{"/certManager/caIssuer/namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := sigsyaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			_, err := template(c, values)
			if err == nil {
				t.Fatalf("values %s were accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func copyChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), chart.Name)
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func edit(t *testing.T, path, old, replacement string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(replacement), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// certManager.caIssuer renders the CA of deploy/components/cert-manager,
// object for object, into the namespace it names, and the apiserver
// accepts it against cert-manager's own CRDs.
func TestCertManagerCAIssuerKnob(t *testing.T) {
	r, err := template(load(t, chartDir(t)), map[string]any{"certManager": map[string]any{"caIssuer": map[string]any{"enabled": true, "namespace": names.CacheNamespace}}})
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	all := parse(t, r.Manifest)
	got := map[string]object{}
	var manifests []string
	for k, o := range all {
		if group, _, _ := strings.Cut(fmt.Sprint(o["apiVersion"]), "/"); group == "cert-manager.io" {
			got[k] = o
			doc, _ := sigsyaml.Marshal(o)
			manifests = append(manifests, string(doc))
		}
	}
	want := parse(t, run.ReadFile(t, filepath.Join(repo.MustRoot(t), "deploy", "components", "cert-manager", "issuers.yaml")))
	if diffs := differences(got, want); len(diffs) > 0 {
		t.Errorf("the chart's CA and the component's differ (regenerate with `make helm-chart`):\n%s", strings.Join(diffs, "\n"))
	}

	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	env := cluster.StartEnvtest(t)
	certmanager.InstallCRDs(t, env.Kubeconfig)
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "create", "namespace", names.CacheNamespace)
	cluster.Run(t, env.Kubeconfig, []byte(strings.Join(manifests, "---\n")), bins["kubectl"], "apply", "--server-side", "--dry-run=server", "-f", "-")
}
