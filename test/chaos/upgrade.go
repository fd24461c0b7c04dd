package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/repo"
)

// UpgradeResult is scenario 6: Memcacheds converged by the previous build
// of the manager, then the current build takes over.
type UpgradeResult struct {
	From string // the previous build's commit
	CRs  int
	// TemplatesChanged counts the Deployments whose pod template the new
	// build changed; PodsReplaced the memcached pods that did not survive.
	TemplatesChanged, PodsReplaced, Pods int
	// Writes the new build made taking over, and how long until it was
	// idle with everything converged.
	Writes   int
	Takeover time.Duration
	Problems []string
}

// PreviousBuild is the commit scenario 6 upgrades from: CHAOS_UPGRADE_FROM,
// else the operator as it was before its latest change (in a shallow clone
// without that commit, the latest change itself: a takeover by the same
// build).
func PreviousBuild() (string, error) {
	if ref := os.Getenv("CHAOS_UPGRADE_FROM"); ref != "" {
		return gitOutput("rev-parse", "--verify", ref+"^{commit}")
	}
	last, err := gitOutput("log", "-1", "--format=%H", "--", "operator")
	if err != nil {
		return "", err
	}
	previous, err := gitOutput("rev-parse", "--verify", "--quiet", last+"^")
	if err != nil {
		// A shallow clone: the takeover still runs, from this very build.
		return last, nil //nolint:nilerr // the fallback is reported as the From commit
	}
	return previous, nil
}

func gitOutput(args ...string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildManagerAt builds the manager of a commit from a git worktree, as
// `make build` builds it, into dir.
func buildManagerAt(commit, dir string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	tree := filepath.Join(dir, "worktree")
	add := exec.Command("git", "worktree", "add", "--detach", tree, commit)
	add.Dir = root
	if out, err := add.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add: %w\n%s", err, out)
	}
	defer func() {
		remove := exec.Command("git", "worktree", "remove", "--force", tree)
		remove.Dir = root
		_ = remove.Run()
	}()
	bin := filepath.Join(dir, "manager-"+commit[:12])
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd")
	build.Dir = filepath.Join(tree, "operator")
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the manager of %s: %w\n%s", commit, err, out)
	}
	return bin, nil
}

// Upgrade runs scenario 6.
func Upgrade(sc Scale, progress func(string, ...any)) (r UpgradeResult, err error) {
	r.CRs = sc.UpgradeCRs
	const ns, size = "upgrade", 3
	if r.From, err = PreviousBuild(); err != nil {
		return r, err
	}
	dir, err := os.MkdirTemp("", "chaos-upgrade-")
	if err != nil {
		return r, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	start := time.Now()
	old, err := buildManagerAt(r.From, dir)
	if err != nil {
		return r, err
	}
	progress("upgrade: built the manager of %s in %v", r.From[:12], time.Since(start).Round(time.Second))

	env, err := NewEnv("upgrade", EnvOptions{Pods: r.CRs * size}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	previous, err := env.StartManager("manager-a", old)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := env.Converge(ctx, previous, ns, r.CRs, size, sc.Timeout); err != nil {
		return r, err
	}
	templates, pods, err := env.snapshot(ns)
	if err != nil {
		return r, err
	}
	r.Pods = len(pods)
	if err := previous.Stop(); err != nil {
		return r, err
	}

	takeover := time.Now()
	current, err := env.StartManager("manager-a", "")
	if err != nil {
		return r, err
	}
	if _, _, err := env.WaitLeaseHolder(LeaseDuration+time.Minute, func(h string) bool { return h != "" }); err != nil {
		return r, err
	}
	if err := current.waitIdle(sc.Timeout); err != nil {
		return r, err
	}
	// A build that changes the pod templates rolls every cache, one pod
	// at a time and minReadySeconds apart: wait until each has converged
	// again, which the first watch, satisfied before the upgrade, cannot
	// tell. (The manager was idle above, so every rollout has started.)
	again, err := env.Watch(ctx, ns, r.CRs, nil)
	if err != nil {
		return r, err
	}
	if err := again.Wait(sc.Timeout); err != nil {
		return r, err
	}
	// Rollouts finish with the old pods gone: wait for the Deployments too.
	if err := current.waitIdle(sc.Timeout); err != nil {
		return r, err
	}
	r.Takeover = time.Since(takeover)
	r.Writes = current.Writes(takeover, time.Now())
	newTemplates, newPods, err := env.snapshot(ns)
	if err != nil {
		return r, err
	}
	for name, t := range templates {
		if newTemplates[name] != t {
			r.TemplatesChanged++
		}
	}
	for uid := range pods {
		if !newPods[uid] {
			r.PodsReplaced++
		}
	}
	progress("upgrade from %s: %d of %d pod templates changed, %d of %d pods replaced, %d writes, idle after %v",
		r.From[:12], r.TemplatesChanged, r.CRs, r.PodsReplaced, r.Pods, r.Writes, r.Takeover.Round(time.Millisecond))
	if r.TemplatesChanged == 0 && r.PodsReplaced > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d memcached pods were replaced although no pod template changed", r.PodsReplaced))
	}
	r.Problems = append(r.Problems, env.nothingLost(ns, r.CRs)...)
	return r, nil
}

// snapshot records each Deployment's pod template and the UIDs of the
// running pods.
func (e *Env) snapshot(ns string) (map[string]string, map[string]bool, error) {
	ctx := context.Background()
	deployments := &appsv1.DeploymentList{}
	if err := e.Admin.List(ctx, deployments, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	templates := map[string]string{}
	for _, d := range deployments.Items {
		b, err := json.Marshal(d.Spec.Template)
		if err != nil {
			return nil, nil, err
		}
		templates[d.Name] = string(b)
	}
	pods := &corev1.PodList{}
	if err := e.Admin.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	uids := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids[string(p.UID)] = true
		}
	}
	return templates, uids, nil
}
