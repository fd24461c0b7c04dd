package controller

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// ownWrites remembers the resourceVersion of the operator's last write to
// each Memcached (finalizer or status). It answers two questions the
// informer cache cannot:
//
//   - Is the cached copy older than what the operator itself just wrote?
//     The cache lags behind the apiserver. A reconcile that compares its new
//     status with a stale cached one may wrongly conclude there is nothing to
//     write, leaving a status that nothing will correct; when the cached
//     resourceVersion is not the one last written, the reconciler reads the
//     object from the apiserver before deciding.
//   - Was a watch event caused by someone else? The operator's own status
//     writes must not trigger reconciles, but a status edited by hand (or by
//     a stale writer) must be put right.
//
// It also remembers the generation the last status write reported, for as
// long as the cache may not show it: whether a write undoes someone else's
// change (a drift heal) depends on whether the spec was already reconciled.
//
// An entry goes when a reconcile reads a cached copy at the last write, or
// ownWriteTTL after that write: a Memcached written once and not reconciled
// again (the usual case) would otherwise keep its entry for good.
type ownWrites struct {
	mu    sync.Mutex
	last  map[types.UID]ownWrite
	now   func() time.Time
	calls int
}

// ownWriteTTL is far longer than an informer takes to see a write.
const ownWriteTTL = 2 * time.Minute

type ownWrite struct {
	rv string
	// earlier are the resourceVersions of the operator's writes before rv
	// that the cache has not shown yet: a reconcile makes two (finalizer,
	// status), and the first one's watch event often arrives after the
	// second was recorded. Bounded by maxEarlierWrites.
	earlier  []string
	reported int64 // status.observedGeneration written; 0 if none
	// status is a fingerprint of what the operator's last status write
	// sets, recorded before the request is sent: its watch event can arrive
	// before the response, when the resourceVersion is not known yet. A
	// fingerprint rather than a copy: with a thousand writes in flight the
	// copies were megabytes of the manager's peak memory.
	status statusFingerprint
	at     time.Time // of the last write
}

const maxEarlierWrites = 4

func newOwnWrites() *ownWrites { return &ownWrites{last: map[types.UID]ownWrite{}, now: time.Now} }

// touched stamps e and, every so often, drops entries past ownWriteTTL.
// Callers hold w.mu.
func (w *ownWrites) touched(uid types.UID, e ownWrite) {
	now := w.now()
	e.at = now
	w.last[uid] = e
	if w.calls++; w.calls%256 != 0 {
		return
	}
	for id, old := range w.last {
		if now.Sub(old.at) > ownWriteTTL {
			delete(w.last, id)
		}
	}
}

// record notes that the operator's write produced resourceVersion rv; a
// status write also says which generation it reported (0 for other writes,
// which keep what an earlier status write reported).
func (w *ownWrites) record(uid types.UID, rv string, reported int64) {
	if uid == "" || rv == "" {
		return
	}
	w.mu.Lock()
	prev := w.last[uid]
	if reported == 0 {
		reported = prev.reported
	}
	earlier := prev.earlier
	if prev.rv != "" {
		earlier = append(earlier, prev.rv)
		if len(earlier) > maxEarlierWrites {
			earlier = earlier[len(earlier)-maxEarlierWrites:]
		}
	}
	w.touched(uid, ownWrite{rv: rv, earlier: earlier, reported: reported, status: prev.status})
	w.mu.Unlock()
}

// statusFingerprint is a SHA-256 of a status as JSON; the zero value is no
// status.
type statusFingerprint [sha256.Size]byte

// fingerprintStatus is status as the watch will show it: the JSON encoding
// gives times second precision, as the apiserver stores them.
func fingerprintStatus(status *cachev1alpha1.MemcachedStatus) statusFingerprint {
	b, err := json.Marshal(status)
	if err != nil {
		// Unreachable for a status (no channels or funcs); no fingerprint
		// only means the watch event costs a reconcile.
		return statusFingerprint{}
	}
	return sha256.Sum256(b)
}

// writingStatus notes the status the operator is about to write.
func (w *ownWrites) writingStatus(uid types.UID, status *cachev1alpha1.MemcachedStatus) {
	written := fingerprintStatus(status)
	w.mu.Lock()
	e := w.last[uid]
	e.status = written
	w.touched(uid, e)
	w.mu.Unlock()
}

// wroteStatus reports whether status is what the operator's last status
// write set (or is setting).
func (w *ownWrites) wroteStatus(uid types.UID, status *cachev1alpha1.MemcachedStatus) bool {
	w.mu.Lock()
	e, ok := w.last[uid]
	w.mu.Unlock()
	return ok && e.status != statusFingerprint{} && e.status == fingerprintStatus(status)
}

// isOwn reports whether rv is the resourceVersion of one of the operator's
// writes to the object that the cache has not shown yet.
func (w *ownWrites) isOwn(uid types.UID, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.last[uid]
	return last.rv == rv || slices.Contains(last.earlier, rv)
}

// reported is the observedGeneration of the operator's last status write
// that the cache may not show yet; 0 if none.
func (w *ownWrites) reported(uid types.UID) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[uid].reported
}

// mayBeStale reports whether a copy at resourceVersion rv may predate the
// operator's last write: it is not that write's version (it may be newer
// too, but only a fresh read can tell, since resourceVersions are opaque).
func (w *ownWrites) mayBeStale(uid types.UID, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[uid]
	return ok && last.rv != "" && last.rv != rv
}

// caughtUp forgets the last write once the cache has shown a copy at or
// after it, so the map holds only objects with writes in flight.
func (w *ownWrites) caughtUp(uid types.UID, rv string) {
	w.mu.Lock()
	if w.last[uid].rv == rv {
		delete(w.last, uid)
	}
	w.mu.Unlock()
}

// forget drops a deleted object.
func (w *ownWrites) forget(uid types.UID) {
	w.mu.Lock()
	delete(w.last, uid)
	w.mu.Unlock()
}
