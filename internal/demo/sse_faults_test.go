package demo

import (
	"strings"
	"testing"
	"time"
)

func TestSSEPlanDealsEveryKind(t *testing.T) {
	const mean = 4 * time.Second
	a, b := newPlanOf(42, mean, numSSEFaults), newPlanOf(42, mean, numSSEFaults)
	var seen [numSSEFaults]int
	for i := range 60 {
		if i%int(numSSEFaults) == 0 {
			seen = [numSSEFaults]int{}
		}
		ka, da := a.next()
		kb, db := b.next()
		if ka != kb || da != db {
			t.Fatalf("draw %d: same seed gave %v/%v and %v/%v", i, ka, da, kb, db)
		}
		if ka < 0 || ka >= numSSEFaults {
			t.Fatalf("draw %d: kind %d out of range", i, int(ka))
		}
		if seen[ka]++; seen[ka] > 1 {
			t.Errorf("draw %d: %v twice in one deal of %d", i, ka, numSSEFaults)
		}
	}
}

func TestSSEFaultNames(t *testing.T) {
	for k := range numSSEFaults {
		if k.String() == "" || strings.HasPrefix(k.String(), "sseFault(") || k.describe() == k.String() {
			t.Errorf("SSE fault %d has no name or description", int(k))
		}
	}
	if got := sseFault(9).String(); got != "sseFault(9)" {
		t.Errorf("unknown kind = %q", got)
	}
}

// The scheduler waits for a stream, then for the plan's delay, and injects
// the plan's fault; a fault that breaks the stream is the last one until a
// new request streams again.
func TestSSEFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean = 7, 20 * time.Millisecond // seed 7 deals a dropped connection first
	out := newLineWriter()
	n := newNarrator(out, time.Now, demoSettings, false)
	f := startTestSSEFeed(t, 100, n)
	s := startSSEFaults(f, newPlanOf(seed, mean, numSSEFaults), n)
	stream := openRawStream(t, testHTTPClient(t), f.URL(), "")
	wantKind, _ := newPlanOf(seed, mean, numSSEFaults).next()
	if wantKind != sseDrop {
		t.Fatalf("seed %d deals %v first; the test expects a dropped connection", seed, wantKind)
	}
	line, _ := out.waitFor(t, "fault   ")
	if !strings.Contains(line, wantKind.describe()) {
		t.Errorf("first fault line %q, want the plan's first fault %v", line, wantKind)
	}
	if err := stream.end(); isCleanEnd(err) {
		t.Errorf("stream ended cleanly, want the dropped connection")
	}
	counts := s.stop()
	if counts != [numSSEFaults]int{sseDrop: 1} {
		t.Errorf("counts = %v, want one dropped connection: no request streamed again for a second fault", counts)
	}
}

func TestSSEFaultsStopWhileWaiting(t *testing.T) {
	f := startTestSSEFeed(t, 100, nil)
	n := newNarrator(newLineWriter(), time.Now, demoSettings, false)
	s := startSSEFaults(f, newPlanOf(1, time.Hour, numSSEFaults), n)
	if counts := s.stop(); counts != [numSSEFaults]int{} {
		t.Errorf("counts = %v, want none", counts)
	}
}
