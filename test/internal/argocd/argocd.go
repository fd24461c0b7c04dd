// Package argocd runs Argo CD for tests, and encodes the rules it applies
// before it syncs an Application.
//
// Start (instance.go) runs the real thing: bin/argocd, built by `make
// tools` from the module pinned in tools/argocd, against a hub cluster.
//
// The rules (this file) are a port of Argo CD's checks, for the unit tests
// of test/deploy, which render every Application and check every object it
// would sync in milliseconds, with no cluster. test/e2e runs each mutation
// the rules refuse against the real Argo CD too, and compares the reasons,
// which the Permit functions word as Argo CD does. Each rule is ported from
// Argo CD's source (github.com/argoproj/argo-cd/v3 v3.6.2), with the same
// matching library (github.com/gobwas/glob v0.2.3, the version Argo CD
// requires):
//
//   - an Application's destination (server or name, and namespace) must
//     match one of its project's destinations, server and namespace
//     glob-matched, "!" patterns denying
//     (pkg/apis/application/v1alpha1/app_project_types.go: isDestinationMatched);
//   - every resource's group and kind must be in the project's cluster or
//     namespace whitelist and not in its blacklist; cluster whitelist
//     entries may also restrict the name
//     (IsGroupKindNamePermitted, isResourceInList, isNamedResourceInList in
//     types.go: path.Match);
//   - a namespaced resource's namespace must itself be a permitted
//     destination (IsResourcePermitted);
//   - the source repository must match one of the project's sourceRepos
//     after URL normalisation (IsSourcePermitted, util/git NormalizeGitURL).
package argocd

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gobwas/glob"
)

// Project is the part of an AppProject's spec the rules read.
type Project struct {
	SourceRepos                []string          `json:"sourceRepos,omitempty"`
	Destinations               []Destination     `json:"destinations,omitempty"`
	ClusterResourceWhitelist   []ClusterResource `json:"clusterResourceWhitelist,omitempty"`
	ClusterResourceBlacklist   []ClusterResource `json:"clusterResourceBlacklist,omitempty"`
	NamespaceResourceWhitelist []GroupKind       `json:"namespaceResourceWhitelist,omitempty"`
	NamespaceResourceBlacklist []GroupKind       `json:"namespaceResourceBlacklist,omitempty"`
	// PermitOnlyProjectScopedClusters needs the cluster secrets, which the
	// rules here do not model; projects using it are refused by Check.
	PermitOnlyProjectScopedClusters bool `json:"permitOnlyProjectScopedClusters,omitempty"`
	// DestinationServiceAccounts name whom a sync impersonates, once
	// argocd-cm's application.sync.impersonation.enabled is on.
	DestinationServiceAccounts []DestinationServiceAccount `json:"destinationServiceAccounts,omitempty"`
}

// DestinationServiceAccount maps destinations (server and namespace globs)
// to a ServiceAccount, "namespace:name" or a name in the Application's
// destination namespace.
type DestinationServiceAccount struct {
	Server                string `json:"server"`
	Namespace             string `json:"namespace,omitempty"`
	DefaultServiceAccount string `json:"defaultServiceAccount"`
}

// Destination is an Application's or a project's (server or name, namespace).
type Destination struct {
	Server    string `json:"server,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// GroupKind of a namespaced whitelist entry.
type GroupKind struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

// ClusterResource is a cluster whitelist entry, optionally by name.
type ClusterResource struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name,omitempty"`
}

// globMatch is Argo CD's globMatch with negation allowed, as its destination
// and source checks call it: "!" negates, "*" matches anything, otherwise a
// gobwas glob; a pattern that does not compile matches nothing.
func globMatch(pattern, val string, separators ...rune) bool {
	if isDenyPattern(pattern) {
		return !match(pattern[1:], val, separators...)
	}
	if pattern == "*" {
		return true
	}
	return match(pattern, val, separators...)
}

func match(pattern, text string, separators ...rune) bool {
	g, err := glob.Compile(pattern, separators...)
	if err != nil {
		return false
	}
	return g.Match(text)
}

func isDenyPattern(pattern string) bool { return strings.HasPrefix(pattern, "!") }

// DestinationPermitted is isDestinationMatched.
func (p Project) DestinationPermitted(dst Destination) bool {
	anyMatched := false
	for _, item := range p.Destinations {
		nameMatched := dst.Name != "" && globMatch(item.Name, dst.Name)
		serverMatched := dst.Server != "" && globMatch(item.Server, dst.Server)
		namespaceMatched := globMatch(item.Namespace, dst.Namespace)
		matched := (serverMatched || nameMatched) && namespaceMatched
		switch {
		case matched:
			anyMatched = true
		case (!nameMatched && isDenyPattern(item.Name)) || (!serverMatched && isDenyPattern(item.Server)) && namespaceMatched:
			return false
		case !namespaceMatched && isDenyPattern(item.Namespace) && serverMatched:
			return false
		}
	}
	return anyMatched
}

// GroupKindPermitted is IsGroupKindNamePermitted: an unset namespace
// whitelist allows every namespaced kind, an empty one none; the cluster
// whitelist must list a cluster-scoped kind.
func (p Project) GroupKindPermitted(group, kind, name string, namespaced bool) bool {
	if namespaced {
		white := p.NamespaceResourceWhitelist == nil || len(p.NamespaceResourceWhitelist) != 0 && inList(group, kind, p.NamespaceResourceWhitelist)
		black := len(p.NamespaceResourceBlacklist) != 0 && inList(group, kind, p.NamespaceResourceBlacklist)
		return white && !black
	}
	white := len(p.ClusterResourceWhitelist) != 0 && inNamedList(group, kind, name, p.ClusterResourceWhitelist)
	black := len(p.ClusterResourceBlacklist) != 0 && inNamedList(group, kind, name, p.ClusterResourceBlacklist)
	return white && !black
}

func inList(group, kind string, list []GroupKind) bool {
	for _, item := range list {
		if ok, err := filepath.Match(item.Kind, kind); ok && err == nil {
			if ok, err := filepath.Match(item.Group, group); ok && err == nil {
				return true
			}
		}
	}
	return false
}

func inNamedList(group, kind, name string, list []ClusterResource) bool {
	for _, item := range list {
		if ok, err := filepath.Match(item.Kind, kind); !ok || err != nil {
			continue
		}
		if ok, err := filepath.Match(item.Group, group); !ok || err != nil {
			continue
		}
		if item.Name == "" {
			return true
		}
		if ok, err := filepath.Match(item.Name, name); ok && err == nil {
			return true
		}
	}
	return false
}

// PermitResource is the check of controller/sync.go's permitResource, with
// its error: the resource's kind must be allowed, and a namespaced
// resource's namespace must be a permitted destination on the cluster.
func (p Project) PermitResource(project, group, kind, name, namespace string, cluster Destination) error {
	if !p.GroupKindPermitted(group, kind, name, namespace != "") {
		return fmt.Errorf("resource %s:%s is not permitted in project %s", group, kind, project)
	}
	if namespace != "" && !p.DestinationPermitted(Destination{Server: cluster.Server, Name: cluster.Name, Namespace: namespace}) {
		return fmt.Errorf("namespace %v is not permitted in project '%s'", namespace, project)
	}
	return nil
}

// PermitSource is util/argo's source check, with its error.
func (p Project) PermitSource(project, repoURL string) error {
	if !p.SourcePermitted(repoURL) {
		return fmt.Errorf("application repo %s is not permitted in project '%s'", repoURL, project)
	}
	return nil
}

// PermitDestination is util/argo's destination check, with its error.
func (p Project) PermitDestination(project string, dst Destination) error {
	if !p.DestinationPermitted(dst) {
		return fmt.Errorf("application destination server '%s' and namespace '%s' do not match any of the allowed destinations in project '%s'", dst.Server, dst.Namespace, project)
	}
	return nil
}

// SourcePermitted is IsSourcePermitted.
func (p Project) SourcePermitted(repoURL string) bool {
	src := normalizeGitURL(repoURL)
	anyMatched := false
	for _, repo := range p.SourceRepos {
		var normalized string
		if isDenyPattern(repo) {
			normalized = "!" + normalizeGitURL(strings.TrimPrefix(repo, "!"))
		} else {
			normalized = normalizeGitURL(repo)
		}
		matched := globMatch(normalized, src, '/')
		if matched {
			anyMatched = true
		} else if isDenyPattern(normalized) {
			return false
		}
	}
	return anyMatched
}

var sshURL = regexp.MustCompile("^(ssh://)?([^/:]*?)@[^@]+$")

// normalizeGitURL is util/git NormalizeGitURL.
func normalizeGitURL(repo string) string {
	repo = strings.ToLower(strings.TrimSpace(repo))
	if sshURL.MatchString(repo) && !strings.HasPrefix(repo, "ssh://") {
		repo = "ssh://" + strings.Replace(repo, ":", "/", 1)
	}
	repo = strings.TrimSuffix(repo, ".git")
	u, err := url.Parse(repo)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.String(), "ssh://")
}
