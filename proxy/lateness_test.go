package proxy_test

import (
	"sync/atomic"
	"testing"
	"time"
)

// latenessTick is how often the probe arms its timer: short enough to see
// a stall of the process soon, long enough to cost nothing.
const latenessTick = 5 * time.Millisecond

// latenessProbe measures how late this process's timers wake their
// goroutines while a test runs. On a starved machine every timer in the
// process fires late, tether's and the test's alike: at load 13 under
// -race a 300 ms gap timer fired 1.2 s late, far past slack. A test that
// bounds when a configured timer fires adds the worst lateness the probe
// saw over the same span, so the bound still says "when the configuration
// says, plus what the machine imposed on every timer", not a guess.
type latenessProbe struct {
	worstNs atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

// startLatenessProbe starts the probe; it stops when the test ends.
func startLatenessProbe(t *testing.T) *latenessProbe {
	t.Helper()
	p := &latenessProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(func() {
		close(p.stop)
		<-p.done
	})
	return p
}

func (p *latenessProbe) run() {
	defer close(p.done)
	timer := time.NewTimer(latenessTick)
	defer timer.Stop()
	armed := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case <-timer.C:
			// time.Now, not the value sent: what counts is when this
			// goroutine ran, as a timer callback in tether would.
			now := time.Now()
			if late := now.Sub(armed) - latenessTick; late > time.Duration(p.worstNs.Load()) {
				p.worstNs.Store(int64(late))
			}
			armed = now
			timer.Reset(latenessTick)
		}
	}
}

// worst is the latest the probe's timer has woken so far, beyond its tick.
func (p *latenessProbe) worst() time.Duration { return time.Duration(p.worstNs.Load()) }

// withinLate is within with the upper bound raised by the probe's worst
// lateness, logged when it mattered.
func withinLate(t *testing.T, p *latenessProbe, what string, got, lo, hi time.Duration) {
	t.Helper()
	late := p.worst()
	if got > hi {
		t.Logf("%s after %v, beyond %v by %v; this process's timers were up to %v late meanwhile", what, got, hi, got-hi, late)
	}
	within(t, what, got, lo, hi+late)
}
