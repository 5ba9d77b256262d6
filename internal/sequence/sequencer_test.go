package sequence

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/labels"
)

// Duplicates are dropped and each is counted; the "duplicates dropped" info
// line that surfaces them comes at most once a second, with the count since
// the last one.
func TestDuplicatesReportedOncePerSecond(t *testing.T) {
	h := newHarness(t, Config{}, false)
	h.burst(1, msg("", 1), msg("", 2), msg("", 2), msg("", 3)) // the first line is due at once
	h.burst(1, msg("", 3), msg("", 1), msg("", 4))             // within the second: no line
	h.clock.Advance(time.Second - time.Nanosecond)
	h.burst(1, msg("", 4), msg("", 5))
	counts := func() []int64 {
		var out []int64
		for _, e := range h.logs.FilterMessage("duplicates dropped").All() {
			out = append(out, e.ContextMap()["count"].(int64))
		}
		return out
	}
	if got := counts(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("duplicates dropped lines within the first second: counts %v, want [1]", got)
	}
	h.clock.Advance(time.Nanosecond)
	h.burst(1, msg("", 6))
	if got := counts(); len(got) != 2 || got[1] != 3 {
		t.Fatalf("duplicates dropped lines after a second: counts %v, want [1 3]", got)
	}
	h.expectGot(msg("", 1), msg("", 2), msg("", 3), msg("", 4), msg("", 5), msg("", 6))
	if dups, _, _, _ := h.metrics.snapshot(); dups != 4 {
		t.Fatalf("%d duplicates counted, want 4", dups)
	}
	if n := h.logged("duplicate dropped"); n != 4 {
		t.Fatalf("%d debug lines per duplicate, want 4", n)
	}
	// What was not surfaced yet is when the connection ends, at once.
	h.burst(1, msg("", 6))
	h.s.Lost(1)
	if got := counts(); len(got) != 3 || got[2] != 1 {
		t.Fatalf("duplicates dropped lines after Lost: counts %v, want [1 3 1]", got)
	}
}

// An in-order message with no gap open reads no clock, and a message
// without a number passes through unsequenced.
func TestInOrderReadsNoClock(t *testing.T) {
	h := newHarness(t, Config{}, false)
	before := h.clock.reads.Load()
	for seq := int64(1); seq <= 100; seq++ {
		h.burst(1, msg("a", seq), msg("b", seq), "plain")
	}
	if n := h.clock.reads.Load() - before; n != 0 {
		t.Fatalf("%d clock reads for in-order messages", n)
	}
	if len(h.app.got) != 300 || h.app.got[2] != "plain" {
		t.Fatalf("app got %d messages, starting %q", len(h.app.got), h.app.got[:3])
	}
}

// The upstream reader keeps the delivery turn across its burst: a gap timer
// firing meanwhile waits for the reader's Flush, and its messages follow
// the burst's. (recApp takes no lock: the race detector checks that the
// two never call the App at once.)
func TestTimerWaitsForReaderBurst(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("", 1), msg("", 3))
	h.s.Offer(1, msgData(msg("", 4)), false, fieldsOf(msg("", 4))) // the turn is the reader's
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		h.clock.Advance(testTimeout) // the timer's callback waits for the turn
	}()
	h.s.Offer(1, msgData(msg("", 6)), false, fieldsOf(msg("", 6)))
	h.s.Flush()
	<-fired
	h.expectGot(msg("", 1), msg("", 3), msg("", 4))
	h.expectGaps(map[string]int{labels.GapSkipped: 1})
}

// Stop waits for a catch-up under way to end, which its cancelled context
// makes it do; goleak (TestMain) checks nothing is left.
func TestStopWaitsForCatchUp(t *testing.T) {
	h := newHarness(t, Config{}, true)
	h.burst(1, msg("", 1), msg("", 3))
	c := h.nextFetch()
	h.stop()
	select {
	case <-c.ctx.Done():
	default:
		t.Fatal("Stop returned with the catch-up's context still live")
	}
	if n := h.logged("gap fetch failed"); n != 0 {
		t.Fatalf("a catch-up cancelled by Stop logged %d failures", n)
	}
	if _, _, _, held := h.metrics.snapshot(); held != 0 {
		t.Fatalf("held bytes gauge at %d after Stop, want 0", held)
	}
}

// Stop waits for a gap timer's callback under way, here blocked on the
// app, and no other callback runs after it.
func TestStopWaitsForTimer(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("", 1), msg("", 3), msg("", 5))
	h.app.gate, h.app.entered = make(chan struct{}), make(chan struct{})
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		h.clock.Advance(testTimeout) // skips 2, then blocks delivering 3
	}()
	<-h.app.entered
	h.s.mu.Lock()
	fetches := h.s.fetchContextLocked() // made with the first fetch otherwise
	h.s.mu.Unlock()
	stopped := make(chan []string)
	go func() {
		h.s.Stop()
		// Read without a lock: only ordered after the callback's writes
		// if Stop waited for it (otherwise -race reports it, too).
		stopped <- h.app.got
	}()
	<-fetches.Done() // Stop has begun: it cancels before it waits
	close(h.app.gate)
	if got := <-stopped; len(got) != 2 {
		t.Fatalf("Stop returned before the timer callback under way: the app had %q", got)
	}
	h.stopped = true
	<-fired
	if n := h.clock.armed(); n != 0 {
		t.Fatalf("%d timers still armed after Stop", n)
	}
	h.expectGot(msg("", 1), msg("", 3)) // 4 is not given up after Stop
}

// The policies' names round-trip, and a wrong one is refused by name.
func TestPolicyText(t *testing.T) {
	for _, p := range []Policy{PolicyClose, PolicySkip, PolicyNotify} {
		var back Policy
		if err := back.UnmarshalText([]byte(p.String())); err != nil || back != p {
			t.Errorf("%v round trip: %v, %v", p, back, err)
		}
	}
	var p Policy
	if err := p.UnmarshalText([]byte("drop")); err == nil || err.Error() != `unknown gap policy "drop": want close, skip or notify` {
		t.Errorf("drop as a gap policy: %v", err)
	}
	if s := Policy(7).String(); s != "GapPolicy(7)" {
		t.Errorf("Policy(7) = %q", s)
	}
}

// The catch-up backoff grows, but a few retries always fit in the timeout.
func TestFetchBackoff(t *testing.T) {
	backoff := fetchBackoff(time.Second)
	want := []time.Duration{100, 200, 250, 250}
	for i, w := range want {
		if got := backoff(i + 1); got != w*time.Millisecond {
			t.Errorf("fetchBackoff(1s)(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
}

// New refuses to run without an App, or to fetch without a way to read
// what it fetched.
func TestNewRequires(t *testing.T) {
	for name, opts := range map[string]Options{
		"no App":      {},
		"no Classify": {App: &recApp{}, Config: Config{Fetch: (&fetcher{}).fetch}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			New(context.Background(), opts)
		}()
	}
}

// A session that never gets a sequenced message (most of a server's, often)
// pays for its Sequencer alone: the tracker, the maps and the fetches'
// context come with the first message that needs them, and a resume or a
// position asked for before then finds nothing.
func TestIdleSequencerAllocatesItselfOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options{Config: Config{Resume: mustResume(t, `{"after":{{.LastSeq}}}`)}, App: discardApp{},
		Log: zap.NewNop(), Metrics: nopMetrics{}}
	var s *Sequencer
	if n := testing.AllocsPerRun(100, func() { s = New(ctx, opts) }); n != 1 {
		t.Errorf("New allocated %v times, want once (the Sequencer)", n)
	}
	if got := s.ResumeMessages(1); len(got) != 0 {
		t.Errorf("resume before any message: %+v, want none", got)
	}
	if _, ok := s.Position().LastSeq(""); ok {
		t.Error("a position before any message has a last number")
	}
	s.Stop()
	if s.tracker != nil || s.gaps != nil || s.streams != nil || s.resumed != nil || s.ctx != nil {
		t.Error("an idle Sequencer made its tracker, maps or fetch context")
	}
}
