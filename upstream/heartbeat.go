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
//
// A wake-up that comes much later than asked for means the whole process was
// stopped (a paused VM, a CPU-starved container): frames may be waiting in the
// socket that the reader has not had a chance to read. Such a wake-up never
// declares the connection dead; it looks again a moment later, when the reader
// has run.
type heartbeat struct {
	interval, timeout time.Duration
	probeSent         time.Time // zero when no probe is outstanding
	due               time.Time // when the caller was asked to come back
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
	b, d := h.decide(now, lastRead, busy)
	if b == beatDead && h.late(now) {
		b, d = beatWait, h.recheck()
	}
	h.due = now.Add(d)
	return b, d
}

func (h *heartbeat) decide(now, lastRead time.Time, busy bool) (beat, time.Duration) {
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

// late reports a wake-up more than half a timeout after it was due.
func (h *heartbeat) late(now time.Time) bool {
	return !h.due.IsZero() && now.Sub(h.due) > h.timeout/2
}

// recheck is the short wait after a late wake-up: long enough for the reader
// to drain what arrived while the process was stopped.
func (h *heartbeat) recheck() time.Duration {
	return min(h.timeout/4, 250*time.Millisecond) + time.Millisecond
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
