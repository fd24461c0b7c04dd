package controller

import (
	"sync"

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
}

type verifiedTemplate struct {
	uid                      types.UID
	fingerprint, desiredHash string
}

func newVerifiedTemplates() *verifiedTemplates {
	return &verifiedTemplates{entries: map[types.NamespacedName]verifiedTemplate{}}
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
