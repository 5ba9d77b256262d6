package demo

import (
	"strings"
	"testing"
	"time"
)

func TestPlanIsSeededAndBounded(t *testing.T) {
	const mean = 4 * time.Second
	a, b, other := newPlan(42, mean), newPlan(42, mean), newPlan(43, mean)
	var seen [numFaultKinds]int
	differs := false
	for i := range 200 {
		if i%int(numFaultKinds) == 0 {
			seen = [numFaultKinds]int{}
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
		if seen[ka]++; seen[ka] > 1 {
			t.Errorf("draw %d: %v twice in one deal of %d", i, ka, numFaultKinds)
		}
	}
	if !differs {
		t.Error("seeds 42 and 43 gave the same 200 faults")
	}
}

func TestFaultKindNames(t *testing.T) {
	for k := range numFaultKinds {
		if k.String() == "" || strings.HasPrefix(k.String(), "faultKind(") || k.describe() == "" {
			t.Errorf("fault kind %d has no name or description", int(k))
		}
	}
	if got := faultKind(9).String(); got != "faultKind(9)" {
		t.Errorf("unknown kind = %q", got)
	}
}

// The scheduler waits for a live, subscribed connection, then for the plan's delay, and
// injects the plan's fault; with no live connection it injects nothing more.
func TestFaultsInjectThePlanWhenHealthy(t *testing.T) {
	const seed, mean = 7, 20 * time.Millisecond
	f := startTestFeed(t, 100, time.Now)
	out := newLineWriter()
	n := newNarrator(out, time.Now, demoSettings, false)
	s := startFaults(f, newPlan(seed, mean), n)
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
	wantKind, _ := newPlan(seed, mean).next()
	line, _ := out.waitFor(t, "fault")
	if !strings.Contains(line, wantKind.describe()) {
		t.Errorf("first fault line %q, want the plan's first fault %v", line, wantKind)
	}
	counts := s.stop()
	total := 0
	for _, c := range counts {
		total += c
	}
	if total != 1 || counts[wantKind] != 1 {
		t.Errorf("counts = %v, want one %v: no connection was live for a second fault", counts, wantKind)
	}
}

func TestFaultsStopWhileWaiting(t *testing.T) {
	f := startTestFeed(t, 100, time.Now)
	n := newNarrator(newLineWriter(), time.Now, demoSettings, false)
	s := startFaults(f, newPlan(1, time.Hour), n)
	// Nothing is connected: the scheduler waits for health and must still
	// stop at once.
	if counts := s.stop(); counts != [numFaultKinds]int{} {
		t.Errorf("counts = %v, want none", counts)
	}
}
