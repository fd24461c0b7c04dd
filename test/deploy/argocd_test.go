package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	jsonpatch "github.com/evanphx/json-patch/v5"
	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/argocd"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

const healthKey = "resource.customizations.health.cache.example.com_Memcached"

// argoHealth runs the health script the way Argo CD does: the object as the
// global `obj`, in gopher-lua (the interpreter Argo CD embeds), returning a
// table with status and message.
func argoHealth(t *testing.T, script string, obj map[string]any) (string, string) {
	t.Helper()
	state := lua.NewState()
	defer state.Close()
	state.SetGlobal("obj", toLua(state, obj))
	if err := state.DoString(script); err != nil {
		t.Fatalf("health script: %v", err)
	}
	ret, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health script returned %s, want a table", state.Get(-1).Type())
	}
	return ret.RawGetString("status").String(), ret.RawGetString("message").String()
}

func toLua(state *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := state.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(state, e))
		}
		return t
	case []any:
		t := state.NewTable()
		for _, e := range v {
			t.Append(toLua(state, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic("unsupported type in object")
}

// healthDir is the health check in Argo CD's resource_customizations
// layout: health.lua, health_test.yaml and testdata/.
const healthDir = "deploy/argocd/health/cache.example.com/Memcached"

func healthScript(t *testing.T) string {
	t.Helper()
	return run.ReadFile(t, filepath.Join(root(t), healthDir, "health.lua"))
}

// healthCase is one entry of health_test.yaml, as Argo CD's own
// resource_customizations tests read it.
type healthCase struct {
	HealthStatus struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"healthStatus"`
	InputPath string `json:"inputPath"`
}

func healthCases(t *testing.T) []healthCase {
	t.Helper()
	var file struct {
		Tests []healthCase `json:"tests"`
	}
	if err := sigsyaml.Unmarshal([]byte(run.ReadFile(t, filepath.Join(root(t), healthDir, "health_test.yaml"))), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Tests) == 0 {
		t.Fatal("health_test.yaml has no tests")
	}
	return file.Tests
}

// The Memcached health check gives Argo CD the right health, and message,
// for every state the operator reports: each case of health_test.yaml run
// as Argo CD runs the script, in gopher-lua. TestArgoCDHealthCheckInArgoCD
// runs the same cases through Argo CD itself.
func TestArgoCDHealthCheck(t *testing.T) {
	script := healthScript(t)
	states := map[string]bool{}
	for _, c := range healthCases(t) {
		t.Run(c.InputPath, func(t *testing.T) {
			obj := map[string]any{}
			if err := sigsyaml.Unmarshal([]byte(run.ReadFile(t, filepath.Join(root(t), healthDir, c.InputPath))), &obj); err != nil {
				t.Fatal(err)
			}
			obj = normalizeNumbers(obj).(map[string]any)
			status, message := argoHealth(t, script, obj)
			if status != c.HealthStatus.Status || message != c.HealthStatus.Message {
				t.Errorf("health %s %q, want %s %q", status, message, c.HealthStatus.Status, c.HealthStatus.Message)
			}
			states[status] = true
		})
	}
	for _, want := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		if !states[want] {
			t.Errorf("no case of health_test.yaml is %s", want)
		}
	}

	// The script Argo CD gets is this file, under the key it looks up.
	cm := render(t, "deploy/argocd")["ConfigMap/argocd-cm"]
	if cm == nil {
		t.Fatal("deploy/argocd renders no argocd-cm")
	}
	data := cm.GetDataMap()
	if data[healthKey] != script {
		t.Errorf("argocd-cm %s does not hold %s/health.lua", healthKey, healthDir)
	}
}

// Argo CD itself (bin/argocd's `admin settings resource-overrides health`,
// which loads argocd-cm as rendered from deploy/argocd and evaluates the
// resource as the application controller does) gives every case of
// health_test.yaml its health and message.
func TestArgoCDHealthCheckInArgoCD(t *testing.T) {
	bins, err := repo.Bin("argocd")
	if err != nil {
		t.Fatal(err)
	}
	cm := render(t, "deploy/argocd")["ConfigMap/argocd-cm"]
	if cm == nil {
		t.Fatal("deploy/argocd renders no argocd-cm")
	}
	cmPath := filepath.Join(t.TempDir(), "argocd-cm.yaml")
	if err := os.WriteFile(cmPath, []byte(cm.MustString()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range healthCases(t) {
		t.Run(c.InputPath, func(t *testing.T) {
			stdout, stderr, code := run.Command(t, nil, bins["argocd"], "admin", "settings", "resource-overrides", "health",
				filepath.Join(root(t), healthDir, c.InputPath), "--argocd-cm-path", cmPath)
			if code != 0 {
				t.Fatalf("argocd admin settings resource-overrides health: exit %d\n%s%s", code, stdout, stderr)
			}
			want := fmt.Sprintf("STATUS: %s\nMESSAGE: %s\n", c.HealthStatus.Status, c.HealthStatus.Message)
			if stdout != want {
				t.Errorf("Argo CD says\n%swant\n%s", stdout, want)
			}
		})
	}
}

// JSON numbers decode as float64; Argo CD hands Lua numbers too, so only
// make sure integral values stay integral.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalizeNumbers(e)
		}
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	}
	return v
}

// The ApplicationSet's Applications pass the checks Argo CD makes before a
// sync (test/internal/argocd, ported from Argo CD's source): destinations
// permitted by their projects, every rendered kind whitelisted, every
// namespace a permitted destination, sources allowed. And the GitOps habits
// the wiring promises hold: dev follows main while staging and prod follow
// release tags, prod syncs by hand, CRD and namespaces are never pruned,
// waves order them first and Memcacheds last, RBAC binds only the
// operator's own roles, and an autoscaled Memcached does not fight
// self-heal.
// appProjects are the AppProjects among rendered objects, by name.
func appProjects(t *testing.T, objs rendered) map[string]argocd.Project {
	t.Helper()
	projects := map[string]argocd.Project{}
	for id, o := range objs {
		if o.GetKind() == "AppProject" {
			var spec struct {
				Spec argocd.Project `json:"spec"`
			}
			if err := sigsyaml.Unmarshal([]byte(o.MustString()), &spec); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			projects[o.GetName()] = spec.Spec
		}
	}
	return projects
}

func TestArgoCDApplications(t *testing.T) {
	objs := render(t, "deploy/argocd")
	projects := appProjects(t, objs)
	apps := expandApplicationSet(t, objs["ApplicationSet/memcached"])
	if len(apps) != len(envs) {
		t.Fatalf("the ApplicationSet generates %d Applications, want one per environment", len(apps))
	}
	for _, app := range apps {
		t.Run(app.Name, func(t *testing.T) {
			for _, err := range checkApplication(t, app, projects) {
				t.Error(err)
			}
			switch wantRev := app.Labels["environment"]; wantRev {
			case "dev":
				wantRev = "main"
				fallthrough
			default:
				src := app.Spec.Source
				if wantRev == "main" && src.TargetRevision != "main" {
					t.Errorf("dev must follow main, got %s", src.TargetRevision)
				}
				if wantRev != "main" && !releaseTag.MatchString(src.TargetRevision) {
					t.Errorf("%s must follow a release tag, got %q", app.Labels["environment"], src.TargetRevision)
				}
			}
			if got, want := app.Spec.Destination.Name, app.Labels["environment"]; got != want || app.Spec.Destination.Server != "" {
				t.Errorf("destination %+v: want the cluster registered as %q, by name", app.Spec.Destination, want)
			}
			if !app.Spec.SyncPolicy.Retry.Refresh {
				t.Error("retry.refresh is off: a retry would sync the revision that failed, not the fix pushed since")
			}
			a := app.Spec.SyncPolicy.Automated
			automated := a != nil && (a.Enabled == nil || *a.Enabled) && a.Prune && a.SelfHeal
			if want := app.Labels["environment"] != "prod"; automated != want {
				t.Errorf("automated sync with prune and self-heal = %v, want %v", automated, want)
			}
			if !slices.Contains(app.Spec.SyncPolicy.SyncOptions, "ServerSideApply=true") {
				t.Errorf("sync options %v lack ServerSideApply=true", app.Spec.SyncPolicy.SyncOptions)
			}
		})
	}

	// The rules catch what Argo CD would refuse: an Application whose
	// destination has no namespace is an InvalidSpecError in Argo CD
	// ("application destination server ... and namespace '' do not match any
	// of the allowed destinations"), and so is a project open to any server.
	t.Run("mutations are refused", func(t *testing.T) {
		app := apps[0]
		noNamespace := app
		noNamespace.Spec.Destination.Namespace = ""
		if errs := checkApplication(t, noNamespace, projects); !containsError(errs, "do not match any of the allowed destinations") {
			t.Errorf("an Application without destination.namespace passed: %v", errs)
		}
		otherCluster := app
		otherCluster.Spec.Destination.Name = "in-cluster"
		if errs := checkApplication(t, otherCluster, projects); !containsError(errs, "do not match any of the allowed destinations") {
			t.Errorf("an Application for an unlisted cluster passed: %v", errs)
		}
	})
}

var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// application is what the rules read of a generated Application.
type application struct {
	Name   string
	Labels map[string]string
	Spec   struct {
		Project     string             `json:"project"`
		Source      applicationSource  `json:"source"`
		Destination argocd.Destination `json:"destination"`
		SyncPolicy  struct {
			Automated *struct {
				Enabled  *bool `json:"enabled"`
				Prune    bool  `json:"prune"`
				SelfHeal bool  `json:"selfHeal"`
			} `json:"automated"`
			SyncOptions []string `json:"syncOptions"`
			Retry       struct {
				Refresh bool `json:"refresh"`
			} `json:"retry"`
		} `json:"syncPolicy"`
		IgnoreDifferences []struct {
			Group        string   `json:"group"`
			Kind         string   `json:"kind"`
			Name         string   `json:"name"`
			JSONPointers []string `json:"jsonPointers"`
		} `json:"ignoreDifferences"`
	}
}

type applicationSource struct {
	RepoURL        string `json:"repoURL"`
	TargetRevision string `json:"targetRevision"`
	Path           string `json:"path"`
}

// expandApplicationSet renders the ApplicationSet's Applications as its
// controller does with goTemplate: for each element of its list generator,
// the template's strings executed with the parameters
// (missingkey=error), then templatePatch executed and merged onto it (maps
// merged, lists replaced, as a strategic merge patch does on Argo CD's
// types, which declare no list merge keys).
func expandApplicationSet(t *testing.T, appSet *yaml.RNode) []application {
	t.Helper()
	if appSet == nil {
		t.Fatal("deploy/argocd renders no ApplicationSet/memcached")
	}
	var set struct {
		Spec struct {
			GoTemplate bool `json:"goTemplate"`
			Generators []struct {
				List struct {
					Elements []map[string]any `json:"elements"`
				} `json:"list"`
			} `json:"generators"`
			Template      map[string]any `json:"template"`
			TemplatePatch string         `json:"templatePatch"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal([]byte(appSet.MustString()), &set); err != nil {
		t.Fatal(err)
	}
	if !set.Spec.GoTemplate || len(set.Spec.Generators) != 1 {
		t.Fatal("the ApplicationSet must use goTemplate and one list generator")
	}
	tmpl, err := sigsyaml.Marshal(set.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	var out []application
	for _, params := range set.Spec.Generators[0].List.Elements {
		rendered := executeTemplate(t, string(tmpl), params)
		patch := executeTemplate(t, set.Spec.TemplatePatch, params)
		base, err := sigsyaml.YAMLToJSON([]byte(rendered))
		if err != nil {
			t.Fatal(err)
		}
		patchJSON, err := sigsyaml.YAMLToJSON([]byte(patch))
		if err != nil {
			t.Fatalf("templatePatch for %v: %v\n%s", params, err, patch)
		}
		merged, err := jsonpatch.MergePatch(base, patchJSON)
		if err != nil {
			t.Fatal(err)
		}
		var app struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(merged, &app); err != nil {
			t.Fatal(err)
		}
		got := application{Name: app.Metadata.Name, Labels: app.Metadata.Labels}
		if err := json.Unmarshal(app.Spec, &got.Spec); err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

func executeTemplate(t *testing.T, text string, params map[string]any) string {
	t.Helper()
	tmpl, err := template.New("").Option("missingkey=error").Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, params); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkApplication runs Argo CD's project checks on an Application and the
// manifests of its sources, plus this repository's own promises.
func checkApplication(t *testing.T, app application, projects map[string]argocd.Project) []error {
	t.Helper()
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	proj, ok := projects[app.Spec.Project]
	if !ok {
		fail("project %q does not exist", app.Spec.Project)
		return errs
	}
	dst := app.Spec.Destination
	if err := proj.PermitDestination(app.Spec.Project, dst); err != nil {
		errs = append(errs, err)
	}
	src := app.Spec.Source
	if err := proj.PermitSource(app.Spec.Project, src.RepoURL); err != nil {
		errs = append(errs, err)
	}
	for id, o := range render(t, src.Path) {
		group, _, _ := strings.Cut(o.GetApiVersion(), "/")
		if !strings.Contains(o.GetApiVersion(), "/") {
			group = ""
		}
		if err := proj.PermitResource(app.Spec.Project, group, o.GetKind(), o.GetName(), o.GetNamespace(), dst); err != nil {
			fail("%s (%s): %w", id, src.Path, err)
		}
		errs = append(errs, checkResource(app, id, o)...)
	}
	return errs
}

// checkResource: waves, pruning, RBAC and autoscaling of one rendered object.
func checkResource(app application, id string, o *yaml.RNode) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(id+": "+format, args...)) }
	annotations := o.GetAnnotations()
	wave := 0
	if w, ok := annotations["argocd.argoproj.io/sync-wave"]; ok {
		var err error
		if wave, err = strconv.Atoi(w); err != nil {
			fail("sync-wave %q", w)
		}
	}
	want := 0
	opts := annotations["argocd.argoproj.io/sync-options"]
	switch o.GetKind() {
	case "Namespace", "CustomResourceDefinition":
		want = -1
		if !strings.Contains(opts, "Prune=false") || !strings.Contains(opts, "Delete=false") {
			fail("sync-options %q: Argo CD must never prune or delete it (Prune=false,Delete=false)", opts)
		}
	case "Memcached":
		want = 1
		if !strings.Contains(opts, "SkipDryRunOnMissingResource=true") {
			fail("sync-options %q lack SkipDryRunOnMissingResource=true", opts)
		}
	case "ClusterRoleBinding", "RoleBinding":
		if ref := scalarOf(o, "roleRef.name"); !strings.HasPrefix(ref, "memcached-operator-") {
			fail("binds %s: the operator's applications bind only the operator's own roles", ref)
		}
	case "HorizontalPodAutoscaler":
		if scalarOf(o, "spec.scaleTargetRef.kind") == "Memcached" {
			ignored := false
			for _, d := range app.Spec.IgnoreDifferences {
				if d.Kind == "Memcached" && slices.Contains(d.JSONPointers, "/spec/size") {
					ignored = true
				}
			}
			if !ignored || !slices.Contains(app.Spec.SyncPolicy.SyncOptions, "RespectIgnoreDifferences=true") {
				fail("autoscales a Memcached, but the Application neither ignores /spec/size nor respects ignored differences: self-heal would undo the autoscaler")
			}
		}
	}
	if wave != want {
		fail("sync wave %d, want %d", wave, want)
	}
	return errs
}

func containsError(errs []error, substr string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), substr) {
			return true
		}
	}
	return false
}

func scalarOf(n *yaml.RNode, field string) string {
	v, _ := n.Pipe(yaml.Lookup(strings.Split(field, ".")...))
	if v == nil {
		return ""
	}
	return v.YNode().Value
}

// The repository URL and the chart registry are set in one place,
// deploy/argocd/settings/settings.yaml, as the docs tell a fork to do: with
// only that file changed, both kustomizations render no trace of the
// upstream values, and every field Argo CD reads them from has the fork's.
func TestArgoCDSettingsAreTheOnePlace(t *testing.T) {
	const forkRepo, forkCharts = "https://git.example.org/team/memcached-operator.git", "oci.example.org/team/charts"
	fs := filesys.MakeFsInMemory()
	src := filepath.Join(root(t), "deploy", "argocd")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		return fs.WriteFile(filepath.Join("/argocd", rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	settings := run.ReadFile(t, filepath.Join(src, "settings", "settings.yaml"))
	upstream := map[string]string{}
	for _, key := range []string{"repoURL", "chartRepoURL"} {
		m := regexp.MustCompile(`(?m)^  ` + key + `: (\S+)$`).FindStringSubmatch(settings)
		if m == nil {
			t.Fatalf("settings.yaml has no data.%s", key)
		}
		upstream[key] = m[1]
	}
	settings = strings.Replace(settings, "repoURL: "+upstream["repoURL"], "repoURL: "+forkRepo, 1)
	settings = strings.Replace(settings, "chartRepoURL: "+upstream["chartRepoURL"], "chartRepoURL: "+forkCharts, 1)
	if err := fs.WriteFile("/argocd/settings/settings.yaml", []byte(settings)); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{
		"ApplicationSet/memcached spec.template.spec.source.repoURL":  forkRepo,
		"AppProject/memcached spec.sourceRepos.0":                     forkRepo,
		"AppProject/memcached spec.sourceRepos.1":                     forkCharts,
		"Application/memcached-operator-helm-dev spec.source.repoURL": forkCharts,
		"Secret/memcached-operator-charts stringData.url":             forkCharts,
	}
	seen := map[string]bool{}
	for _, dir := range []string{"/argocd", "/argocd/helm"} {
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		out, err := m.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		for key, value := range upstream {
			if strings.Contains(string(out), value) {
				t.Errorf("%s still renders the upstream %s %s after settings.yaml changed it", dir, key, value)
			}
		}
		for _, res := range m.Resources() {
			for field, value := range want {
				id, path, _ := strings.Cut(field, " ")
				if id != res.GetKind()+"/"+res.GetName() {
					continue
				}
				seen[field] = true
				node, err := res.Pipe(yaml.Lookup(strings.Split(path, ".")...))
				if got := yaml.GetValue(node); err != nil || got != value {
					t.Errorf("%s: %s = %q, want %s from settings.yaml", dir, field, got, value)
				}
			}
		}
	}
	for field := range want {
		if !seen[field] {
			t.Errorf("nothing renders %s", field)
		}
	}
}
