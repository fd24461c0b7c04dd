package deploy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
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

// The ApplicationSet creates one Application per environment whose path
// exists and renders, with server-side apply, automated sync for dev and
// staging only, and a project that allows every kind the overlay renders.
func TestArgoCDApplications(t *testing.T) {
	objs := render(t, "deploy/argocd")
	appSet := objs["ApplicationSet/memcached"]
	project := objs["AppProject/memcached"]
	if appSet == nil || project == nil {
		t.Fatal("deploy/argocd must render ApplicationSet/memcached and AppProject/memcached")
	}
	elements, err := appSet.Pipe(yaml.Lookup("spec", "generators", "0", "list", "elements"))
	if err != nil || elements == nil {
		t.Fatalf("no list generator: %v", err)
	}
	pathTemplate := appSetString(t, appSet, "spec", "template", "spec", "source", "path")
	syncOptions := appSetString(t, appSet, "spec", "template", "spec", "syncPolicy", "syncOptions")
	if !strings.Contains(syncOptions, "ServerSideApply=true") {
		t.Errorf("Applications must sync with ServerSideApply=true, got %s", syncOptions)
	}
	patch := template.Must(template.New("patch").Option("missingkey=error").Parse(appSetString(t, appSet, "spec", "templatePatch")))
	pathTmpl := template.Must(template.New("path").Option("missingkey=error").Parse(pathTemplate))

	seen := map[string]bool{}
	els, _ := elements.Elements()
	for _, el := range els {
		params := map[string]any{}
		if err := sigsyaml.Unmarshal([]byte(el.MustString()), &params); err != nil {
			t.Fatal(err)
		}
		env, _ := params["env"].(string)
		seen[env] = true
		var path, patched strings.Builder
		if err := pathTmpl.Execute(&path, params); err != nil {
			t.Fatal(err)
		}
		if err := patch.Execute(&patched, params); err != nil {
			t.Fatal(err)
		}
		if path.String() != "overlays/"+env {
			t.Errorf("%s: path %q", env, path.String())
		}
		rendered := render(t, path.String())
		automated := strings.Contains(patched.String(), "automated:") && strings.Contains(patched.String(), "selfHeal: true") && strings.Contains(patched.String(), "prune: true")
		if wantAutomated := env != "prod"; automated != wantAutomated {
			t.Errorf("%s: automated sync with prune and self-heal = %v, want %v", env, automated, wantAutomated)
		}
		checkProjectAllows(t, project, env, rendered)
		checkSyncWaves(t, env, rendered)
	}
	for _, env := range envs {
		if !seen[env] {
			t.Errorf("no Application for %s", env)
		}
	}
}

func appSetString(t *testing.T, n *yaml.RNode, path ...string) string {
	t.Helper()
	v, err := n.Pipe(yaml.Lookup(path...))
	if err != nil || v == nil {
		t.Fatalf("ApplicationSet has no %s", strings.Join(path, "."))
	}
	if v.YNode().Kind == yaml.ScalarNode {
		return v.YNode().Value
	}
	return v.MustString()
}

// checkProjectAllows fails for any rendered kind or namespace the AppProject
// would refuse to sync.
func checkProjectAllows(t *testing.T, project *yaml.RNode, env string, objs rendered) {
	t.Helper()
	allowed := func(list string, group, kind string) bool {
		entries, _ := project.Pipe(yaml.Lookup("spec", list))
		if entries == nil {
			return false
		}
		els, _ := entries.Elements()
		for _, e := range els {
			if scalarOf(e, "group") == group && scalarOf(e, "kind") == kind {
				return true
			}
		}
		return false
	}
	namespaces, _ := project.Pipe(yaml.Lookup("spec", "destinations"))
	for id, o := range objs {
		group := o.GetApiVersion()
		if i := strings.LastIndex(group, "/"); i >= 0 {
			group = group[:i]
		} else {
			group = ""
		}
		list := "namespaceResourceWhitelist"
		if o.GetNamespace() == "" {
			list = "clusterResourceWhitelist"
		}
		if !allowed(list, group, o.GetKind()) {
			t.Errorf("%s: the AppProject's %s does not allow %s (%s)", env, list, o.GetKind(), id)
		}
		if ns := o.GetNamespace(); ns != "" && !strings.Contains(namespaces.MustString(), "namespace: "+ns) {
			t.Errorf("%s: the AppProject has no destination for namespace %s", env, ns)
		}
	}
}

// checkSyncWaves: namespaces and the CRD first, Memcacheds last (without a
// dry run before their CRD exists), everything else in between.
func checkSyncWaves(t *testing.T, env string, objs rendered) {
	t.Helper()
	for id, o := range objs {
		wave := 0
		if w, ok := o.GetAnnotations()["argocd.argoproj.io/sync-wave"]; ok {
			var err error
			if wave, err = strconv.Atoi(w); err != nil {
				t.Errorf("%s %s: sync-wave %q", env, id, w)
			}
		}
		want := 0
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition":
			want = -1
		case "Memcached":
			want = 1
			if opts := o.GetAnnotations()["argocd.argoproj.io/sync-options"]; !strings.Contains(opts, "SkipDryRunOnMissingResource=true") {
				t.Errorf("%s %s: sync-options %q lack SkipDryRunOnMissingResource=true", env, id, opts)
			}
		}
		if wave != want {
			t.Errorf("%s %s: sync wave %d, want %d", env, id, wave, want)
		}
	}
}

func scalarOf(n *yaml.RNode, field string) string {
	v, _ := n.Pipe(yaml.Lookup(field))
	if v == nil {
		return ""
	}
	return v.YNode().Value
}
