package metricsauth

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Answers expire: a revoked binding stops working once the allow lifetime
// has passed, and a denial is not remembered past its own.
func TestTTLCache(t *testing.T) {
	g := NewWithT(t)
	c := newTTLCache[bool]()
	now := time.Unix(1000, 0)
	c.put("k", true, now, allowedTTL)
	v, ok := c.get("k", now.Add(allowedTTL-time.Second))
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(BeTrue())
	_, ok = c.get("k", now.Add(allowedTTL))
	g.Expect(ok).To(BeFalse())

	for i := range maxCached + 10 {
		c.put(fmt.Sprint(i), false, now, deniedTTL)
	}
	g.Expect(len(c.entries)).To(BeNumerically("<=", maxCached))
}
