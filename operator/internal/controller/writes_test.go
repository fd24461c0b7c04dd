package controller

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	. "github.com/onsi/gomega"
)

// The operator's own writes are recognised until the cache shows the last
// one, and the generation the last status write reported is known until
// then, kept across the finalizer writes in between.
func TestOwnWritesRemembersTheReportedGeneration(t *testing.T) {
	g := NewWithT(t)
	w := newOwnWrites()
	g.Expect(w.reported("u")).To(BeZero())
	w.record("u", "10", 2)
	w.record("u", "11", 0) // a finalizer apply
	g.Expect(w.reported("u")).To(Equal(int64(2)))
	g.Expect(w.isOwn("u", "11")).To(BeTrue())
	g.Expect(w.isOwn("u", "10")).To(BeTrue(), "the earlier write's event may arrive after the later write was recorded")
	g.Expect(w.isOwn("u", "9")).To(BeFalse())
	g.Expect(w.mayBeStale("u", "10")).To(BeTrue())
	w.caughtUp("u", "11")
	g.Expect(w.reported("u")).To(BeZero(), "the cache shows the status now")
}

// Entries of Memcacheds that are not reconciled again go after a while.
func TestOwnWritesForgetsOldWrites(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	w := newOwnWrites()
	w.now = func() time.Time { return now }
	for i := range 300 {
		w.record(types.UID(fmt.Sprint(i)), "1", 1)
	}
	now = now.Add(ownWriteTTL + time.Second)
	for i := range 300 {
		w.record(types.UID(fmt.Sprint("new-", i)), "1", 1)
	}
	g.Expect(w.reported("0")).To(BeZero(), "an entry past its lifetime is gone")
	g.Expect(w.reported("new-299")).To(Equal(int64(1)))
	g.Expect(len(w.last)).To(BeNumerically("<=", 300))
}

// The workers share one write tracker, made by whichever reconciles first
// (make test runs this under -race).
func TestTrackerIsMadeOnce(t *testing.T) {
	r := &MemcachedReconciler{}
	seen := make([]*ownWrites, 16)
	var wg sync.WaitGroup
	for i := range seen {
		wg.Go(func() { seen[i] = r.tracker() })
	}
	wg.Wait()
	for _, w := range seen {
		if w != seen[0] {
			t.Fatal("two workers got different write trackers")
		}
	}
}
