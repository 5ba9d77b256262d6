package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault parameters.
const (
	// restartDowntime is how long a restarting feed refuses handshakes: a
	// little longer than the demo's restart floor, so tether's first retry
	// usually meets the 502 and has to back off again.
	restartDowntime = 1500 * time.Millisecond
	// overloadRefusals is how many handshakes an overloaded feed refuses.
	overloadRefusals = 2
	// hiccupDrop and hiccupRepeat size a hiccup: events the live connection
	// misses, then events it gets a second time.
	hiccupDrop   = 3
	hiccupRepeat = 2
)

// faultKind is one way the upstream breaks.
type faultKind int

const (
	faultReset    faultKind = iota // TCP reset of the live connection
	faultHalfOpen                  // silence, no pongs, TCP left open
	faultRestart                   // close 1012, then 502 for a while
	faultOverload                  // close 1013, then 503 + Retry-After
	faultHiccup                    // events dropped, then repeated, on a live connection
	numFaultKinds
)

var faultNames = [numFaultKinds]string{
	faultReset:    "TCP reset",
	faultHalfOpen: "half-open",
	faultRestart:  "server restart",
	faultOverload: "overload",
	faultHiccup:   "hiccup",
}

// faultPlurals name several faults of a kind in the summary.
var faultPlurals = [numFaultKinds]string{
	faultReset:    "TCP resets",
	faultHalfOpen: "half-opens",
	faultRestart:  "server restarts",
	faultOverload: "overloads",
	faultHiccup:   "hiccups",
}

func (k faultKind) String() string {
	if k >= 0 && k < numFaultKinds {
		return faultNames[k]
	}
	return fmt.Sprintf("faultKind(%d)", int(k))
}

// describe is the narration line announcing the fault.
func (k faultKind) describe() string {
	switch k {
	case faultReset:
		return "TCP reset: the feed aborts the upstream connection (RST)"
	case faultHalfOpen:
		return "half-open: the feed goes silent (no events, no pongs) but keeps TCP open"
	case faultRestart:
		return fmt.Sprintf(`server restart: the feed closes with 1012 "service restart" and answers HTTP 502 for %s`,
			fmtSetting(restartDowntime))
	case faultOverload:
		return fmt.Sprintf(`overload: the feed sheds the connection with 1013 "try again later" `+
			`and refuses the next %d handshakes (HTTP 503, Retry-After: 1)`, overloadRefusals)
	case faultHiccup:
		return fmt.Sprintf("hiccup: the feed drops the next %d events on the live connection, then repeats %d it had sent",
			hiccupDrop, hiccupRepeat)
	}
	return k.String()
}

// plan is the seeded fault sequence: which fault comes next and after how
// long. The same seed gives the same sequence. Kinds are dealt from a
// shuffled deck, so every kind shows up in each run of as many faults as
// there are kinds: a short demo shows the whole repertoire instead of, by
// chance, three resets. K is the mode's fault type (faultKind for the
// WebSocket demo, sseFault for the SSE one). Not safe for concurrent use.
type plan[K ~int] struct {
	rng   *rand.Rand
	mean  time.Duration
	kinds K   // how many kinds there are: 0 to kinds-1
	deck  []K // kinds left in the current shuffle
}

// newPlan is the WebSocket demo's plan.
func newPlan(seed uint64, mean time.Duration) *plan[faultKind] {
	return newPlanOf(seed, mean, numFaultKinds)
}

// newPlanOf deals the kinds 0 to kinds-1.
func newPlanOf[K ~int](seed uint64, mean time.Duration, kinds K) *plan[K] {
	// The second PCG word only separates this stream from the price walk's.
	return &plan[K]{rng: rand.New(rand.NewPCG(seed, 0xfa17)), mean: mean, kinds: kinds}
}

// next returns the next fault and the healthy time to wait before it:
// uniform in [mean/2, 3·mean/2), so faults are irregular but never bunch up.
func (p *plan[K]) next() (K, time.Duration) {
	if len(p.deck) == 0 {
		for _, k := range p.rng.Perm(int(p.kinds)) {
			p.deck = append(p.deck, K(k))
		}
	}
	kind := p.deck[0]
	p.deck = p.deck[1:]
	delay := time.Duration(float64(p.mean) * (0.5 + p.rng.Float64()))
	return kind, delay
}

// faults injects the plan's faults into the feed, one at a time: each waits
// until the feed streams to a live connection again, then for its delay.
type faults struct {
	feed   *feed
	plan   *plan[faultKind]
	narr   *narrator
	cancel context.CancelFunc
	done   chan struct{}
	counts [numFaultKinds]int // written by run; read after done is closed
}

// startFaults starts the scheduler goroutine.
func startFaults(f *feed, p *plan[faultKind], n *narrator) *faults {
	ctx, cancel := context.WithCancel(context.Background())
	s := &faults{feed: f, plan: p, narr: n, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// stop ends the scheduler and waits for it; a fault being injected
// completes first. It returns the number of faults injected per kind.
func (s *faults) stop() [numFaultKinds]int {
	s.cancel()
	<-s.done
	return s.counts
}

func (s *faults) run(ctx context.Context) {
	defer close(s.done)
	for {
		kind, delay := s.plan.next()
		if !s.waitHealthy(ctx) || !wait(ctx, delay) || !s.waitHealthy(ctx) {
			return
		}
		s.inject(kind)
	}
}

// waitHealthy waits until the feed has a live connection.
func (s *faults) waitHealthy(ctx context.Context) bool {
	select {
	case <-s.feed.healthy():
		return true
	case <-ctx.Done():
		return false
	}
}

// inject announces and applies one fault.
func (s *faults) inject(kind faultKind) {
	s.narr.fault(kind)
	var applied bool
	switch kind {
	case faultReset:
		applied = s.feed.reset()
	case faultHalfOpen:
		applied = s.feed.stall()
	case faultRestart:
		applied = s.feed.restart(restartDowntime)
	case faultOverload:
		applied = s.feed.overload(overloadRefusals)
	case faultHiccup:
		applied = s.feed.glitch(hiccupDrop, hiccupRepeat)
	}
	if !applied {
		s.narr.say(srcFault, "(the connection was already gone: nothing to break)")
		return
	}
	s.counts[kind]++
}

// wait waits d unless ctx ends first; it reports whether d elapsed.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
