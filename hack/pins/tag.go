package pins

import (
	"fmt"
	"os/exec"
	"strings"
)

// TagRelease commits what pinning env to a release changed (overlays/env)
// and tags that commit with the release's version, so the tag that the
// GitOps wiring of staging and prod follows exists and pins images that
// were pushed. Nothing else in the working tree is committed. An existing
// tag is refused rather than moved: a tag that environments follow must
// not change under them.
func (r *Repo) TagRelease(env, version, ref string) error {
	dir, err := r.overlay(env)
	if err != nil {
		return err
	}
	if err := r.git("rev-parse", "-q", "--verify", "refs/tags/"+version); err == nil {
		return fmt.Errorf("tag %s exists: environments may follow it, so it is not moved; release another VERSION, or delete the tag (git tag -d %s) if nothing follows it yet", version, version)
	}
	rel := r.rel(dir)
	if err := r.git("add", "--", rel); err != nil {
		return err
	}
	msg := fmt.Sprintf("release %s: pin %s to %s", version, env, ref)
	if err := r.git("commit", "-q", "-m", msg, "--", rel); err != nil {
		return err
	}
	if err := r.git("tag", "-a", version, "-m", "release "+version+"\n\n"+ref); err != nil {
		return err
	}
	r.logf("release: committed %s and tagged it %s (push both: git push origin HEAD %s)", rel, version, version)
	return nil
}

// git runs git in the checkout; an error carries what git said.
func (r *Repo) git(args ...string) error {
	out, err := exec.Command("git", append([]string{"-C", r.Root}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
