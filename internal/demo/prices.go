package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// feedOptions configures either feed.
type feedOptions struct {
	rate int        // events per second
	keep int        // events kept for replays; 0: the feed's own window
	rng  *rand.Rand // the session id and the price walk
	now  func() time.Time
	narr *narrator // the SSE feed narrates each request; nil narrates nothing
}

// prices is a feed's numbered events: a random price walk published at rate
// events per second from the moment the first subscriber came (so the app's
// stream begins at 1), of which the latest keep are kept for replays. Both
// feeds use it under their own mutex: it is not safe for concurrent use.
type prices struct {
	rate    int
	keep    int
	rng     *rand.Rand
	started bool
	epoch   time.Time // when numbering began, moved on after long pauses
	head    int64     // the number of the latest event; 0 before the first
	price   float64
	kept    []string // events head-len(kept)+1 … head, as JSON
}

func newPrices(rate, keep int, rng *rand.Rand) prices {
	return prices{rate: rate, keep: keep, rng: rng, price: 100}
}

// start begins the numbering at now, once.
func (p *prices) start(now time.Time) {
	if !p.started {
		p.started, p.epoch = true, now
	}
}

// publish numbers the events due by now and returns their range (from > to
// when none is due). A ticker fires late on a busy machine, so each call
// catches up to rate·elapsed, at most one second's worth at once: after a
// longer pause (a suspended laptop) the schedule moves on instead of
// flooding tether.
func (p *prices) publish(now time.Time) (from, to int64) {
	from = p.head + 1
	if !p.started {
		return from, p.head
	}
	rate := int64(p.rate)
	due := int64(now.Sub(p.epoch)/time.Millisecond) * rate / 1000
	if behind := due - p.head; behind > rate {
		p.epoch = p.epoch.Add(time.Duration(behind-rate) * time.Second / time.Duration(rate))
		due = p.head + rate
	}
	for p.head < due {
		p.head++
		p.price = max(1, p.price+(p.rng.Float64()-0.5)*0.2)
		p.kept = append(p.kept, fmt.Sprintf(`{"t":"event","seq":%d,"price":%.2f}`, p.head, p.price))
	}
	// The events just published are kept even when more than keep came due
	// at once (a late tick): the caller sends them from here. append
	// reallocates with only the kept events, so the array stays within a
	// small multiple of keep.
	if n := max(p.keep, int(p.head-from+1)); len(p.kept) > n {
		p.kept = p.kept[len(p.kept)-n:]
	}
	return from, p.head
}

// oldest is the number of the oldest kept event (head+1 when none is).
func (p *prices) oldest() int64 { return p.head - int64(len(p.kept)) + 1 }

// events returns the kept events numbered from to to.
func (p *prices) events(from, to int64) []string {
	from, to = max(from, p.oldest()), min(to, p.head)
	if from > to {
		return nil
	}
	return p.kept[from-p.oldest() : to-p.oldest()+1]
}

// snapshot is the feed's state at the head, for a resume that reaches back
// further than the kept events.
func (p *prices) snapshot() string {
	return fmt.Sprintf(`{"t":"snapshot","at":%d,"price":%.2f}`, p.head, p.price)
}

// publishEvery calls publish rate times a second until ctx ends.
func publishEvery(ctx context.Context, rate int, publish func()) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			publish()
		}
	}
}
