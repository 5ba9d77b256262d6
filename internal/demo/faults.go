package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// faultKind is what a feed does to break: the mechanisms both feeds know.
// Each mode names and describes the ones it uses (its repertoire).
type faultKind int

const (
	faultReset    faultKind = iota // TCP reset (RST) of the live connection
	faultDrop                      // the connection closes mid-stream (FIN)
	faultStall                     // silence, TCP left open: half-open
	faultEnd                       // a clean end of the stream
	faultRestart                   // WebSocket close 1012, then HTTP 502 for a while
	faultOverload                  // shed (1013 or a clean end), then 503 + Retry-After
	faultHiccup                    // events dropped or repeated on a live connection
)

// fault is one entry of a mode's repertoire: a mechanism and the words for
// it.
type fault struct {
	kind         faultKind
	name, plural string // for the summary: "TCP reset", "TCP resets"
	describe     string // the narration line announcing it
}

// Fault parameters shared by both feeds.
const (
	// restartDowntime is how long a restarting feed refuses handshakes: a
	// little longer than the demo's restart floor, so tether's first retry
	// usually meets the 502 and has to back off again.
	restartDowntime = 1500 * time.Millisecond
	// overloadRefusals is how many requests an overloaded feed refuses.
	overloadRefusals = 2
)

// plan is the seeded fault sequence: which entry of the repertoire comes
// next and after how long. The same seed gives the same sequence. Entries
// are dealt from a shuffled deck, so every one shows up in each run of as
// many faults as there are entries: a short demo shows the whole
// repertoire instead of, by chance, three resets. Not safe for concurrent
// use.
type plan struct {
	rng     *rand.Rand
	mean    time.Duration
	entries int   // how many there are: 0 to entries-1
	deck    []int // entries left in the current shuffle
}

func newPlan(seed uint64, mean time.Duration, entries int) *plan {
	// The second PCG word only separates this stream from the price walk's.
	return &plan{rng: rand.New(rand.NewPCG(seed, 0xfa17)), mean: mean, entries: entries}
}

// next returns the next entry and the healthy stretch before it (which the
// scheduler counts in the events the feed publishes in it): uniform in
// [mean/2, 3·mean/2), so faults are irregular but never bunch up.
func (p *plan) next() (int, time.Duration) {
	if len(p.deck) == 0 {
		p.deck = p.rng.Perm(p.entries)
	}
	i := p.deck[0]
	p.deck = p.deck[1:]
	return i, time.Duration(float64(p.mean) * (0.5 + p.rng.Float64()))
}

// faultsConfig is what the fault scheduler works with: the feed it breaks,
// the app whose progress it goes by, and the plan it deals.
type faultsConfig struct {
	feed       feed
	app        progress
	repertoire []fault
	plan       *plan
	rate       int   // the feed's events per second, to count the plan's delays in events
	last       int64 // no fault at or after this event; 0: no end
	narr       *narrator
}

// faults injects the plan's faults into the feed, one at a time. The plan's
// delays are laid end to end on the event stream, skipping what the feed
// numbered while it was down: a fault comes when the app has the event it
// falls on and the feed streams again. Counting events the app holds, not
// time, keeps the story whole on a loaded machine: tether delivers in
// order, so the app has seen each fault repaired before the next, and which
// faults fall before the demo's last event depends on the seed and the
// outages, not on how fast the machine is.
type faults struct {
	faultsConfig
	cancel context.CancelFunc
	done   chan struct{}
	// Written by run, read after done is closed.
	counts []int // per entry
	after  int64 // the feed's latest event once the latest fault was injected
}

// startFaults starts the scheduler goroutine.
func startFaults(c faultsConfig) *faults {
	ctx, cancel := context.WithCancel(context.Background())
	s := &faults{faultsConfig: c, cancel: cancel, done: make(chan struct{}), counts: make([]int, len(c.repertoire))}
	go s.run(ctx)
	return s
}

// finished is closed once the scheduler has returned: stopped, or, with a
// last event, the plan's next fault falls at or after it.
func (s *faults) finished() <-chan struct{} { return s.done }

// stop ends the scheduler and waits for it; a fault being injected
// completes first. It returns the number of faults injected per entry. It
// is idempotent.
func (s *faults) stop() []int {
	s.cancel()
	<-s.done
	return s.counts
}

// repairedBy is, once finished, the event an app must hold to have seen
// every injected fault repaired: the one after the feed's latest when the
// last fault was injected; 1 when there was none.
func (s *faults) repairedBy() int64 {
	<-s.done
	return s.after + 1
}

func (s *faults) run(ctx context.Context) {
	defer close(s.done)
	var planned int64 // the plan's delays so far, in events
	for {
		i, delay := s.plan.next()
		if !s.feed.waitHealthy(ctx) {
			return
		}
		planned += eventsIn(delay, s.rate)
		at := planned + s.feed.unstreamed()
		if s.last > 0 && at >= s.last {
			return
		}
		if !waitClosed(ctx, s.app.reached(at)) || !s.feed.waitHealthy(ctx) {
			return
		}
		f := s.repertoire[i]
		s.narr.fault(f)
		if !s.feed.inject(f.kind) {
			s.narr.say(srcFault, "(the %s was already gone: nothing to break)", s.narr.words.link)
			continue
		}
		s.counts[i]++
		s.after = s.feed.published()
	}
}

// eventsIn is how many events a feed publishing rate events per second
// numbers in d, at least one.
func eventsIn(d time.Duration, rate int) int64 {
	return max(int64(math.Ceil(d.Seconds()*float64(rate))), 1)
}

// countsLine reads "5: 1 TCP reset, 2 half-opens, …", or "none injected".
func countsLine(repertoire []fault, counts []int) string {
	total := 0
	var parts []string
	for i, c := range counts {
		total += c
		if c > 0 {
			parts = append(parts, plural(int64(c), repertoire[i].name, repertoire[i].plural))
		}
	}
	if total == 0 {
		return "none injected"
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

// waitClosed waits for ch to be closed unless ctx ends first; it reports
// whether ch was closed.
func waitClosed(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
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
