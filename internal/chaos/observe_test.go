package chaos_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// counts implements proxy.Metrics by counting each event under a name.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounts() *counts { return &counts{n: map[string]int{}} }

func (c *counts) add(key string, n int) {
	c.mu.Lock()
	c.n[key] += n
	c.mu.Unlock()
}

func (c *counts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counts) SessionStarted(string)      { c.add("session started", 1) }
func (c *counts) SessionEnded(string)        { c.add("session ended", 1) }
func (c *counts) Message(dir, _ string)      { c.add("message "+dir, 1) }
func (c *counts) AppDropped(r string)        { c.add("app dropped "+r, 1) }
func (c *counts) DroppedFromOutbox(n int)    { c.add("dropped from outbox", n) }
func (c *counts) HandshakeRejected(r string) { c.add("handshake rejected "+r, 1) }
func (c *counts) DrainStarted()              { c.add("drain started", 1) }
func (c *counts) Replayed(n int)             { c.add("replayed", n) }
func (c *counts) DuplicateDropped()          { c.add("duplicate", 1) }
func (c *counts) Gap(outcome string)         { c.add("gap "+outcome, 1) }
func (c *counts) Recovered(method string)    { c.add("recovered "+method, 1) }
func (c *counts) HeldBytesChanged(int)       {}

// outages records the upstream client's losses and how long each lasted,
// from the loss to the next confirmed connection. record is the
// Options.OnState callback: it never blocks.
type outages struct {
	mu        sync.Mutex
	lost      int
	lostAt    time.Time
	down      bool
	longest   time.Duration
	confirmed int
	up        bool // the last state entered was confirmed
}

func (o *outages) record(s upstream.State) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.up = s == upstream.StateConfirmed
	switch s {
	case upstream.StateLost:
		o.lost++
		if !o.down {
			o.down, o.lostAt = true, time.Now()
		}
	case upstream.StateConfirmed:
		o.confirmed++
		if o.down {
			o.down = false
			o.longest = max(o.longest, time.Since(o.lostAt))
		}
	}
}

// now reports whether the upstream is confirmed and how many losses the
// client has had so far.
func (o *outages) now() (up bool, lost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.up, o.lost
}

func (o *outages) summary() (lost int, longest time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost, o.longest
}

// formatCounts prints a map as "k=v, ..." in key order.
func formatCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
