package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
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
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/internal/argocd"
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

func healthScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "argocd", "health", "memcached.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The Memcached health check gives Argo CD the right health for every
// state the operator reports.
func TestArgoCDHealthCheck(t *testing.T) {
	script := healthScript(t)
	cond := func(typ, status, reason string) string {
		return "{type: " + typ + ", status: \"" + status + "\", reason: " + reason + ", message: " + typ + " is " + status + "}"
	}
	tests := []struct{ name, object, want string }{
		{"just created: no status", `{metadata: {generation: 1}, spec: {size: 3}}`, "Progressing"},
		{"status for an older generation", `{metadata: {generation: 3}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Ready", "True", "Ready") + `]}}`, "Progressing"},
		{"rolling out", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Ready", "False", "RollingOut") + `, ` + cond("Degraded", "False", "AsExpected") + `]}}`, "Progressing"},
		{"ready", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Ready", "True", "Ready") + `, ` + cond("Degraded", "False", "AsExpected") + `]}}`, "Healthy"},
		{"degraded", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Ready", "False", "ApplyFailed") + `, ` + cond("Degraded", "True", "ApplyFailed") + `]}}`, "Degraded"},
		{"stalled", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Ready", "False", "ResourceExists") + `, ` + cond("Stalled", "True", "ResourceExists") + `]}}`, "Degraded"},
		{"stalled on refused pods", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Stalled", "True", "ReplicaFailure") + `, ` + cond("Degraded", "True", "ReplicaFailure") + `]}}`, "Degraded"},
		{"rollout deadline exceeded", `{metadata: {generation: 2}, spec: {size: 3}, status: {observedGeneration: 2, conditions: [` + cond("Degraded", "True", "ProgressDeadlineExceeded") + `]}}`, "Degraded"},
		{"paused", `{metadata: {generation: 4}, spec: {size: 3, paused: true}, status: {observedGeneration: 4, conditions: [` + cond("Ready", "True", "Paused") + `, ` + cond("Progressing", "False", "Paused") + `]}}`, "Suspended"},
		{"no Ready condition yet", `{metadata: {generation: 1}, spec: {size: 3}, status: {observedGeneration: 1, conditions: []}}`, "Progressing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{}
			if err := sigsyaml.Unmarshal([]byte(tt.object), &obj); err != nil {
				t.Fatal(err)
			}
			obj = normalizeNumbers(obj).(map[string]any)
			status, message := argoHealth(t, script, obj)
			if status != tt.want {
				t.Errorf("health %s (%s), want %s", status, message, tt.want)
			}
			if message == "" {
				t.Errorf("health %s without a message", status)
			}
		})
	}

	// The script Argo CD gets is this file, under the key it looks up.
	cm := render(t, "deploy/argocd")["ConfigMap/argocd-cm"]
	if cm == nil {
		t.Fatal("deploy/argocd renders no argocd-cm")
	}
	data := cm.GetDataMap()
	if data[healthKey] != script {
		t.Errorf("argocd-cm %s does not hold deploy/argocd/health/memcached.lua", healthKey)
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
	if len(apps) != 2*len(envs) {
		t.Fatalf("the ApplicationSet generates %d Applications, want an operator and an instances one per environment", len(apps))
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
				for _, src := range app.Spec.Sources {
					if wantRev == "main" && src.TargetRevision != "main" {
						t.Errorf("dev must follow main, got %s", src.TargetRevision)
					}
					if wantRev != "main" && !releaseTag.MatchString(src.TargetRevision) {
						t.Errorf("%s must follow a release tag, got %q", app.Labels["environment"], src.TargetRevision)
					}
				}
			}
			automated := app.Spec.SyncPolicy.Automated != nil && app.Spec.SyncPolicy.Automated.Prune && app.Spec.SyncPolicy.Automated.SelfHeal
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
		otherCluster.Spec.Destination.Server = "https://kubernetes.default.svc"
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
		Project     string              `json:"project"`
		Sources     []applicationSource `json:"sources"`
		Destination argocd.Destination  `json:"destination"`
		SyncPolicy  struct {
			Automated *struct {
				Prune    bool `json:"prune"`
				SelfHeal bool `json:"selfHeal"`
			} `json:"automated"`
			SyncOptions []string `json:"syncOptions"`
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
// controller does with goTemplate: every combination of the matrix's list
// generators, the template's strings executed with the parameters
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
				Matrix struct {
					Generators []struct {
						List struct {
							Elements []map[string]any `json:"elements"`
						} `json:"list"`
					} `json:"generators"`
				} `json:"matrix"`
			} `json:"generators"`
			Template      map[string]any `json:"template"`
			TemplatePatch string         `json:"templatePatch"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal([]byte(appSet.MustString()), &set); err != nil {
		t.Fatal(err)
	}
	if !set.Spec.GoTemplate || len(set.Spec.Generators) != 1 || len(set.Spec.Generators[0].Matrix.Generators) != 2 {
		t.Fatal("the ApplicationSet must use goTemplate and one matrix of two list generators")
	}
	tmpl, err := sigsyaml.Marshal(set.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	var out []application
	for _, a := range set.Spec.Generators[0].Matrix.Generators[0].List.Elements {
		for _, b := range set.Spec.Generators[0].Matrix.Generators[1].List.Elements {
			params := map[string]any{}
			maps.Copy(params, a)
			maps.Copy(params, b)
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
	if !proj.DestinationPermitted(dst) {
		fail("application destination server '%s' and namespace '%s' do not match any of the allowed destinations in project '%s'", dst.Server, dst.Namespace, app.Spec.Project)
	}
	if len(app.Spec.Sources) == 0 {
		fail("no sources")
	}
	for _, src := range app.Spec.Sources {
		if !proj.SourcePermitted(src.RepoURL) {
			fail("source %s is not permitted in project %s", src.RepoURL, app.Spec.Project)
		}
		for id, o := range render(t, src.Path) {
			group, _, _ := strings.Cut(o.GetApiVersion(), "/")
			if !strings.Contains(o.GetApiVersion(), "/") {
				group = ""
			}
			if !proj.ResourcePermitted(group, o.GetKind(), o.GetName(), o.GetNamespace(), dst.Server) {
				fail("%s (%s, namespace %q) is not permitted in project %s on %s", id, src.Path, o.GetNamespace(), app.Spec.Project, dst.Server)
			}
			errs = append(errs, checkResource(app, id, o)...)
		}
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
