package argocd

import "strings"

// Hook rules, from gitops-engine as vendored in Argo CD
// (gitops-engine/pkg/sync/hook/hook.go, hook/helm/{hook,type}.go and
// common/types.go NewHookType, at 06f1253):
//
//   - an object with an argocd.argoproj.io/hook annotation is an Argo CD
//     hook (unless its only type is Skip); without one, an object with a
//     helm.sh/hook annotation other than crd-install is a hook;
//   - of Helm's hook types only pre-install and pre-upgrade (as PreSync)
//     and post-install and post-upgrade (as PostSync) are run; any other
//     (pre-delete, post-delete, pre-rollback, test, ...) yields no hook
//     type, so the object is neither synced as a resource nor ever run.

var helmHookTypes = map[string]string{
	"pre-install": "PreSync", "pre-upgrade": "PreSync",
	"post-install": "PostSync", "post-upgrade": "PostSync",
}

// IsHook is hook.IsHook: Argo CD does not sync a hook as a resource.
func IsHook(annotations map[string]string) bool {
	if _, ok := annotations["argocd.argoproj.io/hook"]; ok {
		types := HookTypes(annotations)
		return len(types) != 1 || types[0] != "Skip"
	}
	v, ok := annotations["helm.sh/hook"]
	return ok && v != "crd-install"
}

// HookTypes is hook.Types: the sync phases in which Argo CD runs the hook;
// none means it never runs.
func HookTypes(annotations map[string]string) []string {
	var types []string
	for _, t := range csv(annotations["argocd.argoproj.io/hook"]) {
		switch t {
		case "PreSync", "Sync", "PostSync", "SyncFail", "Skip": // common.NewHookType
			types = append(types, t)
		}
	}
	if len(types) > 0 {
		return types
	}
	for _, t := range csv(annotations["helm.sh/hook"]) {
		if at, ok := helmHookTypes[t]; ok {
			types = append(types, at)
		}
	}
	return types
}

// csv is resourceutil.GetAnnotationCSVs: comma-separated, trimmed, no
// empty values.
func csv(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
