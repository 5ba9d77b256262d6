package demo

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Events are numbered from the first subscriber on at the rate, a late tick
// catches up, and a long pause moves the schedule on instead of flooding.
func TestPricesPublish(t *testing.T) {
	p := newPrices(20, 5, rand.New(rand.NewPCG(1, 2)))
	if from, to := p.publish(t0); from <= to {
		t.Fatalf("due before any subscriber = %d..%d, want nothing", from, to)
	}
	p.start(t0)
	now := t0
	steps := []struct {
		advance  time.Duration
		from, to int64
	}{
		{50 * time.Millisecond, 1, 1},
		{10 * time.Millisecond, 2, 1},   // nothing due yet
		{940 * time.Millisecond, 2, 20}, // a late tick catches up
		{10 * time.Second, 21, 40},      // a long pause: one second's worth
		{50 * time.Millisecond, 41, 41}, // and the schedule moved on
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		from, to := p.publish(now)
		if from != s.from || to != s.to {
			t.Errorf("step %d: due = %d..%d, want %d..%d", i, from, to, s.from, s.to)
		}
		// More due at once than the 5 kept: the caller still gets them all.
		if n := len(p.events(from, to)); n != int(to-from+1) {
			t.Errorf("step %d: %d of events %d..%d kept for sending", i, n, from, to)
		}
	}
	if p.oldest() != 37 || len(p.events(1, 41)) != 5 {
		t.Errorf("kept events %d.. (%d of them), want the last 5 from 37", p.oldest(), len(p.events(1, 41)))
	}
	if got := p.events(40, 40); len(got) != 1 || decodeEventSeq(t, got[0]) != 40 {
		t.Errorf("events(40, 40) = %q, want event 40", got)
	}
}

func decodeEventSeq(t *testing.T, msg string) int64 {
	t.Helper()
	return decodeEvent(t, msg).Seq
}
