package upstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// fakeClock is a Clock the test moves: each tick it is sent advances the
// monotonic clock by the tick, and the wall clock by the tick plus any
// sleep or setting the test asked for.
type fakeClock struct {
	ticks   chan time.Time
	started chan struct{} // closed at the first Now: Watch has its baseline
	once    sync.Once

	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{ticks: make(chan time.Time), started: make(chan struct{}), wall: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.once.Do(func() { close(c.started) })
	return c.wall, c.mono
}

func (c *fakeClock) Tick(time.Duration) (<-chan time.Time, func()) { return c.ticks, func() {} }

// step moves the clocks by one tick, the wall clock by extra more, and
// delivers the tick; it returns once Watch has taken it.
func (c *fakeClock) step(t *testing.T, tick, extra time.Duration) {
	t.Helper()
	c.mu.Lock()
	c.mono += tick
	c.wall = c.wall.Add(tick + extra)
	c.mu.Unlock()
	select {
	case c.ticks <- time.Time{}:
	case <-time.After(waitLimit):
		t.Fatal("Watch did not take the tick")
	}
}

// watch runs Resumes.Watch on clock until the test ends, and returns once
// Watch has read its baseline.
func watch(t *testing.T, clock *fakeClock) *upstream.Resumes {
	t.Helper()
	r := upstream.NewResumes()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(ctx, upstream.WatchOptions{Clock: clock, Tick: time.Second, Jump: 3 * time.Second})
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitClosed(t, clock.started, "Watch's start")
	return r
}

// TestResumeWatch: a wall clock that ran ahead of the monotonic clock by
// more than Jump over a tick is a resume; scheduling delays (both clocks
// advance), NTP slews and a clock set back are not. The tick after a
// resume compares from the resume on.
func TestResumeWatch(t *testing.T) {
	clock := newFakeClock()
	r := watch(t, clock)
	for _, tc := range []struct {
		name   string
		extra  time.Duration
		resume bool
	}{
		{"a plain tick", 0, false},
		{"a slew", 500 * time.Millisecond, false},
		{"at the threshold", 3 * time.Second, false},
		{"set back an hour", -time.Hour, false},
		{"slept 40 minutes", 40 * time.Minute, true},
		{"the tick after", 0, false},
		{"slept 4 seconds", 4 * time.Second, true},
	} {
		c := r.C()
		clock.step(t, time.Second, tc.extra)
		// Watch notifies before it waits for the next tick: once a second
		// tick is taken, a Notify for the first has happened.
		clock.step(t, time.Second, 0)
		if fired := isClosed(c); fired != tc.resume {
			t.Errorf("%s: resume %v, want %v", tc.name, fired, tc.resume)
		}
	}
}

// TestResumeProbesAtOnce: a connection that went half-open while the
// machine slept is found dead within PingTimeout of the resume, although
// the next heartbeat probe would only be due an hour later; the Client
// reconnects. On a live connection the probe is answered and nothing
// happens.
func TestResumeProbesAtOnce(t *testing.T) {
	stalled := make(chan struct{})
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send("hello")
		if c.N() == 1 {
			c.Stall() // half-open: nothing read, no pong
			close(stalled)
		}
		holdOpen(c)
	}})
	clock := newFakeClock()
	resumes := watch(t, clock)
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.PingInterval = time.Hour
	// Longer than the package's pingTimeout: the live connection below must
	// answer the probe within it on a machine as loaded as CI's (100ms was
	// missed there once).
	const timeout = 10 * pingTimeout
	opts.PingTimeout = timeout
	opts.Resume = resumes
	startClient(t, opts)
	if m := h.nextMessage(t); m.gen != 1 {
		t.Fatalf("message of gen %d, want 1", m.gen)
	}
	// The resume's probe must find the stall in place: a ping read before
	// it is answered, and the connection is rightly live.
	waitClosed(t, stalled, "the first connection's stall")
	woke := time.Now()
	clock.step(t, time.Second, 20*time.Minute) // the laptop slept 20 minutes
	lost := h.nextLost(t)
	if !errors.Is(lost.err, upstream.ErrHeartbeatTimeout) {
		t.Fatalf("Lost(%v), want ErrHeartbeatTimeout", lost.err)
	}
	// Detected within the tick (given at once here), PingTimeout and slack.
	if took := lost.at.Sub(woke); took > timeout+slack {
		t.Errorf("dead connection found %v after the resume, want within PingTimeout %v (+%v slack)", took, timeout, slack)
	}
	if m := h.nextMessage(t); m.gen != 2 || m.data != "hello" {
		t.Fatalf("after the resume: message %q of gen %d, want hello of gen 2", m.data, m.gen)
	}

	t.Run("a live connection survives the probe", func(t *testing.T) {
		<-srv.Conns() // the stalled first
		second := recv(t, srv.Conns(), "the second connection")
		clock.step(t, time.Second, 20*time.Minute)
		eventually(t, "the resume's ping", func() bool { return second.Pings() > 0 })
		// Dead it would be within PingTimeout of the probe: wait that long
		// and some, and it must still be up.
		wait := time.NewTimer(3 * timeout)
		defer wait.Stop()
		select {
		case lost := <-h.losts:
			t.Fatalf("Lost(%v) after a resume on a live connection", lost.err)
		case <-wait.C:
		}
	})
}

// eventually polls cond every few milliseconds until it holds, within
// waitLimit: for state no event announces (a counter of the test server).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
	}
}
