package demo

import (
	"context"
	"fmt"
)

// overloadRetryAfter is the Retry-After, in seconds, of an overloaded SSE
// feed's 503s (it refuses overloadRefusals requests, as the WebSocket feed
// refuses handshakes): longer than its retry field, so the narration shows
// tether honouring the larger of the two.
const overloadRetryAfter = 2

// sseHiccupRepeat is how many of its latest events a hiccup sends again.
const sseHiccupRepeat = 2

// sseFault is one way an event-stream upstream breaks.
type sseFault int

const (
	sseReset    sseFault = iota // TCP reset of the live stream
	sseDrop                     // the connection closes mid-response (FIN)
	sseStall                    // silence, TCP left open
	sseEnd                      // the response ends cleanly
	sseOverload                 // the response ends, then 503 + Retry-After
	sseHiccup                   // the latest events sent again on the live stream
	numSSEFaults
)

var sseFaultNames = [numSSEFaults]string{
	sseReset:    "TCP reset",
	sseDrop:     "dropped connection",
	sseStall:    "silent stall",
	sseEnd:      "stream end",
	sseOverload: "overload",
	sseHiccup:   "hiccup",
}

// sseFaultPlurals name several faults of a kind in the summary.
var sseFaultPlurals = [numSSEFaults]string{
	sseReset:    "TCP resets",
	sseDrop:     "dropped connections",
	sseStall:    "silent stalls",
	sseEnd:      "stream ends",
	sseOverload: "overloads",
	sseHiccup:   "hiccups",
}

func (k sseFault) String() string {
	if k >= 0 && k < numSSEFaults {
		return sseFaultNames[k]
	}
	return fmt.Sprintf("sseFault(%d)", int(k))
}

// describe is the narration line announcing the fault.
func (k sseFault) describe() string {
	switch k {
	case sseReset:
		return "TCP reset: the feed aborts tether's event stream (RST)"
	case sseDrop:
		return "dropped connection: the feed's connection closes mid-response, the stream cut short (a crashed process)"
	case sseStall:
		return "silent stall: the feed stops writing (no events, no keep-alive comments) but keeps TCP open"
	case sseEnd:
		return "stream end: the feed ends the response cleanly, as servers do on a deploy or at a maximum stream age"
	case sseOverload:
		return fmt.Sprintf("overload: the feed ends the stream and answers the next %d requests with HTTP 503, Retry-After: %d",
			overloadRefusals, overloadRetryAfter)
	case sseHiccup:
		return fmt.Sprintf("hiccup: the feed sends its last %d events again, without their ids (a glitch that re-delivers them)",
			sseHiccupRepeat)
	}
	return k.String()
}

// sseFaults injects the plan's faults into the SSE feed, one at a time:
// each waits until the feed streams to tether again after the previous
// one, then for its delay.
type sseFaults struct {
	feed   *sseFeed
	plan   *plan[sseFault]
	narr   *narrator
	cancel context.CancelFunc
	done   chan struct{}
	counts [numSSEFaults]int // written by run; read after done is closed
}

// startSSEFaults starts the scheduler goroutine.
func startSSEFaults(f *sseFeed, p *plan[sseFault], n *narrator) *sseFaults {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sseFaults{feed: f, plan: p, narr: n, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// stop ends the scheduler and waits for it. It returns the number of
// faults injected per kind.
func (s *sseFaults) stop() [numSSEFaults]int {
	s.cancel()
	<-s.done
	return s.counts
}

func (s *sseFaults) run(ctx context.Context) {
	defer close(s.done)
	after := 0 // requests seen when the last fault broke the stream
	for {
		kind, delay := s.plan.next()
		if !s.feed.waitHealthy(ctx, after) || !wait(ctx, delay) || !s.feed.waitHealthy(ctx, after) {
			return
		}
		// A hiccup leaves the stream up: the next fault needs no new one.
		n := s.feed.requests()
		if s.inject(kind) && kind != sseHiccup {
			after = n
		}
	}
}

// inject announces and applies one fault, and reports whether there was a
// stream to apply it to.
func (s *sseFaults) inject(kind sseFault) bool {
	s.narr.sseFault(kind)
	var applied bool
	switch kind {
	case sseReset:
		applied = s.feed.reset()
	case sseDrop:
		applied = s.feed.drop()
	case sseStall:
		applied = s.feed.stall()
	case sseEnd:
		applied = s.feed.end()
	case sseOverload:
		applied = s.feed.overload(overloadRefusals)
	case sseHiccup:
		applied = s.feed.hiccup()
	}
	if !applied {
		s.narr.say(srcFault, "(the stream was already gone: nothing to break)")
		return false
	}
	s.counts[kind]++
	return true
}
