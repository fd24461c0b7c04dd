package ring

import (
	"fmt"
	"testing"
)

// The ring's point of existing: a server that leaves and comes back under
// the same entry takes back exactly its keys, one that leaves moves only
// its own keys, and a new entry takes about 1/N from every server.
func TestRingMovesOnlyWhatItMust(t *testing.T) {
	three := New([]string{"a-0.a.ns.svc:11211", "a-1.a.ns.svc:11211", "a-2.a.ns.svc:11211"})
	two := New([]string{"a-0.a.ns.svc:11211", "a-2.a.ns.svc:11211"})
	renamed := New([]string{"a-0.a.ns.svc:11211", "a-9.a.ns.svc:11211", "a-2.a.ns.svc:11211"})
	const n = 10000
	share := map[string]int{}
	moved, takenByNew := 0, 0
	for i := range n {
		key := fmt.Sprintf("k-%d", i)
		before := three.Server(key)
		share[before]++
		if after := two.Server(key); after != before && before != "a-1.a.ns.svc:11211" {
			moved++
		}
		if after := renamed.Server(key); after != before && before != "a-1.a.ns.svc:11211" {
			takenByNew++
		}
		if again := New(three.Servers()).Server(key); again != before {
			t.Fatalf("the same list maps %s to %s, then %s", key, before, again)
		}
	}
	if moved != 0 {
		t.Errorf("removing a-1 moved %d keys of other servers, want 0", moved)
	}
	for s, c := range share {
		if c < n/5 || c > n/2 {
			t.Errorf("%s holds %d of %d keys: the ring is lopsided", s, c, n)
		}
	}
	// A new entry in place of a-1 takes keys from the others too.
	if takenByNew < n/10 {
		t.Errorf("a new entry took only %d keys of the remaining servers", takenByNew)
	}
	t.Logf("shares %v; a new entry took %d of the other servers' keys", share, takenByNew)
}
