package proxy_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// With a memory budget far below what the queues towards two paused apps
// could hold (4 MiB each), the two sessions stop at their share and what
// the pool had, their upstream reads paused and counted, while a third
// session's app gets its whole stream meanwhile. No connection is lost,
// and once the paused apps read again each gets its stream whole and in
// order: backpressure, nothing dropped.
func TestMemoryBudgetPausesHoldersOthersFlow(t *testing.T) {
	const (
		count = 200
		size  = 32 << 10 // 6.4 MiB per stream: beyond the budget, and beyond kernel buffers (awaitAppQueued)
		limit = 2 << 20
		share = 256 << 10
	)
	b, err := budget.New(budget.Options{Limit: limit, Share: share, Sessions: 4}) // pool: 1 MiB
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Budget = b
		o.MaxSessions = 4
		o.DownstreamBufferBytes = 4 << 20
		noHeartbeat(o) // the upstream's senders block on purpose
	})
	padding := strings.Repeat("x", size)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	flood := func(c *upstreamtest.Conn) {
		t.Cleanup(func() { _ = c.Close() })
		wg.Go(func() {
			for i := range count {
				if c.Send(fmt.Sprintf("%d|%s", i, padding)) != nil {
					return
				}
			}
		})
	}
	resume := make([]chan struct{}, 2)
	var paused []*app
	for i := range resume {
		resume[i] = make(chan struct{})
		paused = append(paused, dialApp(t, e.url, appOptions{paused: resume[i]}))
		flood(up.nextConn(t))
	}
	eventually(t, "both paused sessions wait for the budget", func() bool { return b.Waiting() == 2 })
	if used := b.Used(); used > limit {
		t.Fatalf("budget holds %d bytes, over its %d limit", used, limit)
	}

	healthy := dialApp(t, e.url, appOptions{})
	flood(up.nextConn(t))
	expectStream(t, healthy, count, padding)
	if used := b.Used(); used > limit {
		t.Errorf("budget holds %d bytes, over its %d limit", used, limit)
	}
	queued := e.srv.AppQueuedBytes()
	var sum int64
	for _, q := range queued {
		sum += q
	}
	t.Logf("budget: %d of %d bytes used, %d pauses; queued towards the apps: %v", b.Used(), limit, b.Pauses(), queued)
	if sum > limit {
		t.Errorf("queues towards the apps hold %d bytes, over the %d budget", sum, limit)
	}
	if b.Pauses() == 0 {
		t.Error("no pause counted")
	}

	for i, a := range paused {
		close(resume[i])
		expectStream(t, a, count, padding)
	}
	for drained := false; !drained; {
		select {
		case ev := <-e.states.ch:
			if ev.state == upstream.StateLost {
				t.Error("an upstream connection was lost")
				drained = true
			}
		default:
			drained = true // every state recorded is read
		}
	}
	if n := up.srv.Handshakes(); n != 3 {
		t.Errorf("upstream saw %d handshakes, want 3: one per session, none lost", n)
	}
	if b.Waiting() != 0 {
		t.Errorf("%d sessions still wait for the budget after their apps read everything", b.Waiting())
	}
}

// expectStream reads count messages "i|padding" in order.
func expectStream(t *testing.T, a *app, count int, padding string) {
	t.Helper()
	for i := range count {
		m := a.next(t)
		if want := fmt.Sprintf("%d|%s", i, padding); string(m.data) != want {
			t.Fatalf("message %d: got %d bytes starting %.10q", i, len(m.data), m.data)
		}
	}
}

// Messages held behind a gap count on the session's memory budget: one the
// budget refuses gets the gap policy at once, as one beyond
// TETHER_HOLD_MAX_BYTES does, logged with the budget as the reason. And a
// session whose hold buffer holds most of what the budget gives it still
// delivers the in-order messages of its other streams, one at a time, so
// the message that fills the gap arrives: its reads are not paused for
// bytes only those reads can free.
func TestMemoryBudgetCountsHeldMessages(t *testing.T) {
	const limit = 2048
	padding := strings.Repeat(" ", 520) // each held message costs 520+ bytes plus the overhead: three fit, not four
	event := func(ch string, seq int64) string { return chanEvent(ch, seq) + padding }
	b, err := budget.New(budget.Options{Limit: limit, Share: limit, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	phase2 := make(chan struct{})
	up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if _, _, err := c.Read(c.Context()); err != nil {
			return
		}
		for _, seq := range []int64{1, 3, 4, 5, 6} {
			_ = c.Send(event("a", seq))
		}
		select {
		case <-phase2:
		case <-c.Done():
			return
		}
		for _, m := range []string{event("a", 8), event("a", 9), event("a", 10), event("b", 1), event("b", 2), event("a", 7)} {
			_ = c.Send(m)
		}
		<-c.Done()
	}})
	m := newCounts()
	core, logs := observer.New(zapcore.WarnLevel)
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.Logger = zap.New(core)
		o.Budget = b
		o.MaxSessions = 1
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Rules.StreamPath = mustPath(t, "channel")
		o.Sequences = proxy.Sequences{
			GapTimeout: time.Hour, // only the budget gives a gap up
			GapPolicy:  proxy.GapSkip,
		}
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	expect := func(ch string, seqs ...int64) {
		t.Helper()
		for _, seq := range seqs {
			if got := strings.TrimSpace(string(a.next(t).data)); got != chanEvent(ch, seq) {
				t.Fatalf("app got %.60s, want event %s/%d", got, ch, seq)
			}
		}
	}
	expect("a", 1, 3, 4, 5, 6)
	m.await(t, "gap skipped", 1)
	if n := logs.FilterMessage("gap given up, skipped").FilterField(zap.String("reason", "memory budget full (TETHER_MEMORY_LIMIT)")).Len(); n != 1 {
		t.Fatalf("%d lines giving the gap up for the memory budget, want 1: %v", n, logs.All())
	}

	// Phase 2 starts with nothing on the budget (no rule here makes the
	// subscription a replayed one): three held messages fit then, and the
	// in-order ones that follow do not.
	eventually(t, "the queue towards the app is written", func() bool { return b.Used() == 0 })
	close(phase2)
	expect("b", 1, 2)
	expect("a", 7, 8, 9, 10)
	if n := m.get("gap skipped"); n != 1 {
		t.Errorf("%d gaps skipped, want only the first", n)
	}
	m.awaitExactly(t, "held bytes", 0)
	eventually(t, "the budget holds nothing once everything is written", func() bool { return b.Used() == 0 })
}

// The replay log counts on the session's memory budget: a subscription the
// budget cannot keep closes the app with 1013 "replay log full", as one
// beyond the log's caps does, rather than be left out of the next replay.
func TestMemoryBudgetCountsReplayLog(t *testing.T) {
	b, err := budget.New(budget.Options{Limit: 2200, Share: 2200, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	up := newProtoServer(t, protoOptions{welcome: `{"t":"welcome"}`})
	core, logs := observer.New(zapcore.WarnLevel)
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		designExample(t)(o)
		o.Logger = zap.New(core)
		o.Budget = b
		o.MaxSessions = 1
	})
	a := dialApp(t, e.url, appOptions{})
	uc := up.nextConn(t)
	// Three subscriptions of about 310 bytes fit, with room for what is
	// on its way meanwhile (the message being read from the app, the one
	// written to the upstream, the replies towards the app); a fourth of
	// about 1530 does not. Each is read by the upstream before the next
	// goes, so the queue towards the upstream holds at most one.
	for i, ch := range []string{"a", "b", "c", "a"} { // a re-subscribe replaces
		a.sendText(t, sub(ch+strings.Repeat("x", 280)))
		eventually(t, "the upstream read the subscription", func() bool { return len(up.connLog(uc.N())) == i+1 })
	}
	a.ping(t, "still open")
	a.expectOpen(t)
	if held := b.Used(); held < 3*300 {
		t.Fatalf("budget holds %d bytes with three subscriptions logged, want them counted", held)
	}
	a.sendText(t, sub("d"+strings.Repeat("x", 1500)))
	a.expectClosed(t, testTimeout, 1013, "replay log full")
	if n := e.srv.RestoreCounters().ReplayLogFull; n != 1 {
		t.Errorf("ReplayLogFull = %d, want 1", n)
	}
	lines := logs.FilterMessage("replay log full, closing app").All()
	if len(lines) != 1 {
		t.Fatalf("%d \"replay log full\" lines, want 1", len(lines))
	}
	if _, ok := lines[0].ContextMap()["memory_budget"]; !ok {
		t.Errorf("the line does not say what the session holds on the budget: %v", lines[0].ContextMap())
	}
	eventually(t, "the budget holds nothing once the session ended", func() bool { return b.Used() == 0 })
}
