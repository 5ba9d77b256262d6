package upstream

import (
	"context"
	"time"
)

// heartbeat decides when to probe a quiet connection and when to declare it dead
// (DESIGN.md "Dead detection"). It holds no timer: the client's serve loop asks it
// what to do at each wake-up, so the rule is testable with plain timestamps.
//
// A connection is dead when PingTimeout passes after a probe with no inbound frame
// at all: data, pong or heartbeat reply all count. Time the reader spends blocked
// handing a message to a slow app is not silence (busy), so backpressure never
// makes a healthy upstream look dead.
type heartbeat struct {
	interval, timeout time.Duration
	probeSent         time.Time // zero when no probe is outstanding
}

type beat int

const (
	beatWait  beat = iota // nothing to do before the returned instant
	beatProbe             // send a probe now
	beatDead              // the connection is dead
)

// next returns the action due at now given the last inbound frame, and how long
// to wait before asking again.
func (h *heartbeat) next(now, lastRead time.Time, busy bool) (beat, time.Duration) {
	if busy {
		h.probeSent = time.Time{}
		return beatWait, h.interval
	}
	if !h.probeSent.IsZero() {
		if lastRead.After(h.probeSent) {
			h.probeSent = time.Time{}
		} else if waited := now.Sub(h.probeSent); waited >= h.timeout {
			return beatDead, 0
		} else {
			return beatWait, h.timeout - waited
		}
	}
	silence := now.Sub(lastRead)
	if silence >= h.interval {
		h.probeSent = now
		return beatProbe, h.timeout
	}
	return beatWait, h.interval - silence
}

// probe sends one heartbeat: the configured application message, or a
// WebSocket ping.
func (c *Client) probe(ctx context.Context, conn *Conn) {
	if len(c.opts.HeartbeatMessage) > 0 {
		// Never block the state machine behind a full write queue: a probe that
		// cannot be queued is a probe the peer will not answer, and the timeout
		// decides.
		pctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		_ = conn.SendText(pctx, c.opts.HeartbeatMessage)
		cancel()
		return
	}
	_ = conn.ws.Ping(nil)
}
