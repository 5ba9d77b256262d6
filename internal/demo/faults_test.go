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

// The scheduler waits for a live, subscribed connection, then for the
// plan's delay, and injects the plan's fault; with no live connection it
// injects nothing more.
func TestFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean = 7, 20 * time.Millisecond
	m := webSocketMode()
	f := startTestFeed(t, 100, time.Now)
	out := newLineWriter()
	s := startFaults(f, m.repertoire, newPlan(seed, mean, len(m.repertoire)), wsNarrator(out))
	p := dialSubscribed(t, f) // the feed is healthy once it streams
	p.text()
	// Faults like restart close the connection and wait for its echo; keep
	// reading so the peer answers.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			if _, err := p.frame(); err != nil {
				return
			}
		}
	}()
	defer func() { _ = p.conn.Close(); <-readerDone }()
	want, _ := newPlan(seed, mean, len(m.repertoire)).next()
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
}

// The same for an event stream: a fault that breaks the stream is the last
// one until a new request streams again.
func TestSSEFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean = 7, 20 * time.Millisecond // seed 7 deals a dropped connection first
	m := sseMode()
	out := newLineWriter()
	n := sseNarrator(out)
	f := startTestSSEFeed(t, 100, n)
	s := startFaults(f, m.repertoire, newPlan(seed, mean, len(m.repertoire)), n)
	stream := openRawStream(t, testHTTPClient(t), f.URL(), "")
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
		s := startFaults(feeds[m.name], m.mode.repertoire, newPlan(1, time.Hour, len(m.mode.repertoire)), n)
		// Nothing is connected: the scheduler waits for health and must
		// still stop at once.
		for _, c := range s.stop() {
			if c != 0 {
				t.Errorf("%s: counts = %v, want none", m.name, c)
			}
		}
	}
}
