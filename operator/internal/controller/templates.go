package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// verifiedTemplates remembers, for each Deployment, the fingerprint of the
// last pod template the operator saw holding everything it applies, and the
// desired hash (resources.DesiredHashAnnotation) of what it applied. The
// cache keeps only the fingerprint of a Deployment's template
// (dropPodTemplate), so this record is what lets a reconcile tell, without
// reading the template, that it is still as verified: the same fingerprint
// and the same desired object. Anything else (a template changed by hand or
// by another tool, a new desired template, a restarted manager that
// remembers nothing) makes the reconcile read the Deployment from the
// apiserver and compare in full.
//
// An entry is replaced after every apply and every full comparison, and goes
// when the Memcached is gone. Entries are keyed by name and hold the UID, so
// a Deployment deleted and created again under the same name is not taken for
// the one verified.
type verifiedTemplates struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]verifiedTemplate
	// warm is closed once the warm-up (warmup.go) has verified what it
	// could; closed from the start when no warm-up runs.
	warm chan struct{}
}

type verifiedTemplate struct {
	uid                      types.UID
	fingerprint, desiredHash string
}

func newVerifiedTemplates() *verifiedTemplates {
	warm := make(chan struct{})
	close(warm)
	return &verifiedTemplates{entries: map[types.NamespacedName]verifiedTemplate{}, warm: warm}
}

// warmingUp says a warm-up will run: awaitWarmUp waits for warmedUp.
func (v *verifiedTemplates) warmingUp() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.warm = make(chan struct{})
}

// warmedUp ends the wait, once.
func (v *verifiedTemplates) warmedUp() {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.warm:
	default:
		close(v.warm)
	}
}

// warmUpWait bounds how long a reconcile waits for the warm-up before it
// reads its template itself: the warm-up of 10,000 Deployments takes
// seconds, and a warm-up that cannot finish must not hold reconciles back.
const warmUpWait = 30 * time.Second

// awaitWarmUp returns when the warm-up is over, after warmUpWait, or when
// ctx ends.
func (v *verifiedTemplates) awaitWarmUp(ctx context.Context) {
	v.mu.Lock()
	warm := v.warm
	v.mu.Unlock()
	select {
	case <-warm:
	case <-ctx.Done():
	case <-time.After(warmUpWait):
	}
}

// holds reports whether the Deployment key with uid was verified with this
// template fingerprint against this desired hash.
func (v *verifiedTemplates) holds(key types.NamespacedName, uid types.UID, fingerprint, desiredHash string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.entries[key] == verifiedTemplate{uid: uid, fingerprint: fingerprint, desiredHash: desiredHash}
}

// verified records that the Deployment key with uid has a template with
// this fingerprint, which holds what desiredHash stands for.
func (v *verifiedTemplates) verified(key types.NamespacedName, uid types.UID, fingerprint, desiredHash string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.entries[key] = verifiedTemplate{uid: uid, fingerprint: fingerprint, desiredHash: desiredHash}
}

func (v *verifiedTemplates) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.entries, key)
}
