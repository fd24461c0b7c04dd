package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
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
type ownWrites struct {
	mu   sync.Mutex
	last map[types.UID]string
}

func newOwnWrites() *ownWrites { return &ownWrites{last: map[types.UID]string{}} }

// record notes that the operator's write produced resourceVersion rv.
func (w *ownWrites) record(uid types.UID, rv string) {
	if uid == "" || rv == "" {
		return
	}
	w.mu.Lock()
	w.last[uid] = rv
	w.mu.Unlock()
}

// isOwn reports whether rv is the resourceVersion of the operator's last
// write to the object.
func (w *ownWrites) isOwn(uid types.UID, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[uid] == rv
}

// mayBeStale reports whether a copy at resourceVersion rv may predate the
// operator's last write: it is not that write's version (it may be newer
// too, but only a fresh read can tell, since resourceVersions are opaque).
func (w *ownWrites) mayBeStale(uid types.UID, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[uid]
	return ok && last != rv
}

// caughtUp forgets the last write once the cache has shown a copy at or
// after it, so the map holds only objects with writes in flight.
func (w *ownWrites) caughtUp(uid types.UID, rv string) {
	w.mu.Lock()
	if w.last[uid] == rv {
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
