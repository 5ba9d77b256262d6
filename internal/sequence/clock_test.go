package sequence

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// virtualClock is a Clock whose time moves only when a test advances it.
// Timers fire during Advance, each at its own time, in the goroutine that
// advances: when Advance returns, every callback due has run. A test must
// not hold the Sequencer's delivery turn (an Offer without its Flush) while
// it advances in the same goroutine, as the upstream reader never waits
// while it holds it.
type virtualClock struct {
	reads atomic.Int64 // calls to Now

	mu     sync.Mutex
	now    time.Time
	timers []*virtualTimer // armed, in arming order
}

type virtualTimer struct {
	c    *virtualClock
	when time.Time
	f    func()
}

func newVirtualClock() *virtualClock {
	return &virtualClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *virtualClock) Now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &virtualTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop disarms t; it reports false when t fired or was stopped already.
func (t *virtualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.removeLocked(t)
}

func (c *virtualClock) removeLocked(t *virtualTimer) bool {
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}

// Advance moves the time forward by d, firing on the way every timer due by
// then, the earliest first (in arming order among equals), with the time
// set to its own deadline; timers armed by a callback fire too if they are
// due by the end.
func (c *virtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		t := c.nextLocked(end)
		if t == nil {
			break
		}
		c.removeLocked(t)
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// nextLocked is the earliest timer due by end, or nil.
func (c *virtualClock) nextLocked(end time.Time) *virtualTimer {
	var next *virtualTimer
	for _, t := range c.timers {
		if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
			next = t
		}
	}
	return next
}

// armed counts the timers waiting to fire.
func (c *virtualClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
