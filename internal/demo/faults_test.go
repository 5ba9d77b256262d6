package demo

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// modes are both demos, for tests that hold for each.
var modes = []struct {
	name string
	mode mode
}{{"websocket", webSocketMode()}, {"sse", sseMode()}}

func TestPlanIsSeededAndBounded(t *testing.T) {
	const mean = 4 * time.Second
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			n := len(m.mode.repertoire)
			a, b, other := newPlan(42, mean, n), newPlan(42, mean, n), newPlan(43, mean, n)
			seen := make([]int, n)
			differs := false
			for i := range 200 {
				if i%n == 0 {
					clear(seen)
				}
				ka, da := a.next()
				kb, db := b.next()
				ko, do := other.next()
				if ka != kb || da != db {
					t.Fatalf("draw %d: same seed gave %v/%v and %v/%v", i, ka, da, kb, db)
				}
				differs = differs || ka != ko || da != do
				if da < mean/2 || da >= mean*3/2 {
					t.Errorf("draw %d: delay %v outside [%v, %v)", i, da, mean/2, mean*3/2)
				}
				if ka < 0 || ka >= n {
					t.Fatalf("draw %d: entry %d out of range", i, ka)
				}
				if seen[ka]++; seen[ka] > 1 {
					t.Errorf("draw %d: %s twice in one deal of %d", i, m.mode.repertoire[ka].name, n)
				}
			}
			if !differs {
				t.Error("seeds 42 and 43 gave the same 200 faults")
			}
		})
	}
}

// Every fault of a repertoire has its words, and is one its feed knows: a
// feed with nothing connected declines it rather than not knowing it.
func TestRepertoires(t *testing.T) {
	feeds := map[string]feed{"websocket": startTestFeed(t, 100, time.Now), "sse": startTestSSEFeed(t, 100, nil)}
	for _, m := range modes {
		for _, f := range m.mode.repertoire {
			if f.name == "" || f.plural == "" || !strings.HasPrefix(f.describe, f.name+": ") {
				t.Errorf("%s: fault %+v lacks a name, a plural or a description that starts with its name", m.name, f)
			}
			if feeds[m.name].inject(f.kind) {
				t.Errorf("%s: %s applied with nothing connected", m.name, f.name)
			}
		}
	}
	if got := countsLine(webSocketMode().repertoire, []int{2, 0, 0, 1, 0}); got != "3: 2 TCP resets, 1 overload" {
		t.Errorf("countsLine = %q", got)
	}
	if got := countsLine(sseMode().repertoire, make([]int, 6)); got != "none injected" {
		t.Errorf("countsLine of nothing = %q", got)
	}
}

// gate is an app's progress the test controls: reached hands the test the
// event asked for and is closed when the test opens the gate.
type gate struct {
	asked chan int64
	open  chan struct{}
}

func newGate() *gate { return &gate{asked: make(chan int64, 16), open: make(chan struct{})} }

func (g *gate) reached(seq int64) <-chan struct{} {
	g.asked <- seq
	return g.open
}

// reachedAlways is the progress of an app that is always up to date.
type reachedAlways struct{}

func (reachedAlways) reached(int64) <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// streamingPeer connects a subscriber to f, so that f is healthy, and keeps
// reading until the test ends: faults like restart close the connection
// and wait for its echo.
func streamingPeer(t *testing.T, f *wsFeed) {
	t.Helper()
	p := dialSubscribed(t, f)
	p.text()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			if _, err := p.frame(); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = p.conn.Close(); <-readerDone })
}

// The scheduler waits for a live, subscribed connection, then until the
// app has the event the plan's delay falls on, and injects the plan's
// fault; with no live connection it injects nothing more.
func TestFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean, rate = 7, 20 * time.Millisecond, 100
	m := webSocketMode()
	f := startTestFeed(t, rate, time.Now)
	out := newLineWriter()
	app := newGate()
	s := startFaults(faultsConfig{feed: f, app: app, repertoire: m.repertoire,
		plan: newPlan(seed, mean, len(m.repertoire)), rate: rate, narr: wsNarrator(out)})
	streamingPeer(t, f)
	want, delay := newPlan(seed, mean, len(m.repertoire)).next()
	// The feed streamed every event it numbered: nothing to skip.
	if asked, n := <-app.asked, eventsIn(delay, rate); asked != n {
		t.Errorf("the scheduler waits for event %d, want %d: the plan's delay at %d events/s", asked, n, rate)
	}
	select {
	case l := <-out.lines:
		t.Fatalf("narrated %q before the app had the event", l)
	default:
	}
	close(app.open)
	line, _ := out.waitFor(t, "fault")
	if !strings.Contains(line, m.repertoire[want].describe) {
		t.Errorf("first fault line %q, want the plan's first fault %s", line, m.repertoire[want].name)
	}
	counts := s.stop()
	total := 0
	for _, c := range counts {
		total += c
	}
	if total != 1 || counts[want] != 1 {
		t.Errorf("counts = %v, want one %s: no connection was live for a second fault", counts, m.repertoire[want].name)
	}
	// The gate let the fault through before the feed had numbered that
	// event, as no real app would; repairedBy is still the feed's count
	// when it struck, plus one.
	if got, head := s.repairedBy(), f.published(); got < 1 || got > head+1 {
		t.Errorf("repairedBy = %d, want the event after the feed's count at the fault (now %d)", got, head)
	}
}

// With a last event, the scheduler injects the faults that fall before it,
// then finishes: seed 4 deals a hiccup first (the feed stays healthy, so
// the second fault falls the plan's next delay after it).
func TestFaultsFinishBeforeTheLastEvent(t *testing.T) {
	const seed, mean, rate = 4, time.Second, 20
	m := webSocketMode()
	p := newPlan(seed, mean, len(m.repertoire))
	first, d1 := p.next()
	_, d2 := p.next()
	if m.repertoire[first].kind != faultHiccup {
		t.Fatalf("seed %d deals %s first; the test expects a hiccup", seed, m.repertoire[first].name)
	}
	at1, at2 := eventsIn(d1, rate), eventsIn(d1, rate)+eventsIn(d2, rate)
	for _, tc := range []struct {
		name   string
		last   int64
		faults int
	}{
		{"the first falls on the last event", at1, 0},
		{"the second falls on it", at2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startTestFeed(t, rate, time.Now)
			app := newGate()
			close(app.open)
			s := startFaults(faultsConfig{feed: f, app: app, repertoire: m.repertoire,
				plan: newPlan(seed, mean, len(m.repertoire)), rate: rate, last: tc.last, narr: wsNarrator(newLineWriter())})
			defer s.stop()
			streamingPeer(t, f)
			select {
			case <-s.finished():
			case <-time.After(testTimeout):
				t.Fatalf("the scheduler did not finish within %v", testTimeout)
			}
			if got := len(app.asked); got != tc.faults {
				t.Errorf("the scheduler waited for %d events, want %d", got, tc.faults)
			}
			if got := s.stop()[first]; got != tc.faults {
				t.Errorf("%d hiccups injected, want %d", got, tc.faults)
			}
		})
	}
}

// The same for an event stream: a fault that breaks the stream is the last
// one until a new request streams again.
func TestSSEFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean = 7, 20 * time.Millisecond // seed 7 deals a dropped connection first
	m := sseMode()
	out := newLineWriter()
	n := sseNarrator(out)
	f := startTestSSEFeed(t, 100, n)
	app := newGate()
	s := startFaults(faultsConfig{feed: f, app: app, repertoire: m.repertoire,
		plan: newPlan(seed, mean, len(m.repertoire)), rate: 100, narr: n})
	stream := openRawStream(t, testHTTPClient(t), f.URL(), "")
	// The app has the events once the response has begun: a fault before
	// that would fail the request instead of breaking its stream.
	close(app.open)
	want, _ := newPlan(seed, mean, len(m.repertoire)).next()
	if m.repertoire[want].kind != faultDrop {
		t.Fatalf("seed %d deals %s first; the test expects a dropped connection", seed, m.repertoire[want].name)
	}
	line, _ := out.waitFor(t, "fault   ")
	if !strings.Contains(line, m.repertoire[want].describe) {
		t.Errorf("first fault line %q, want the plan's first fault", line)
	}
	if err := stream.end(); isCleanEnd(err) {
		t.Errorf("stream ended cleanly, want the dropped connection")
	}
	counts := s.stop()
	wantCounts := make([]int, len(m.repertoire))
	wantCounts[want] = 1
	if !slices.Equal(counts, wantCounts) {
		t.Errorf("counts = %v, want one dropped connection: no request streamed again for a second fault", counts)
	}
}

func TestFaultsStopWhileWaiting(t *testing.T) {
	feeds := map[string]feed{"websocket": startTestFeed(t, 100, time.Now), "sse": startTestSSEFeed(t, 100, nil)}
	for _, m := range modes {
		n := newNarrator(newLineWriter(), time.Now, demoSettings, false, m.mode.words)
		s := startFaults(faultsConfig{feed: feeds[m.name], app: reachedAlways{}, repertoire: m.mode.repertoire,
			plan: newPlan(1, time.Hour, len(m.mode.repertoire)), rate: 100, narr: n})
		// Nothing is connected: the scheduler waits for health and must
		// still stop at once.
		for _, c := range s.stop() {
			if c != 0 {
				t.Errorf("%s: counts = %v, want none", m.name, c)
			}
		}
		if got := s.repairedBy(); got != 1 {
			t.Errorf("%s: repairedBy = %d with no fault, want 1", m.name, got)
		}
	}
}
