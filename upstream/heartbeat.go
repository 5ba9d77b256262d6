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
// at all: data, pong or heartbeat reply all count. Time the reader spends handing
// messages to a slow app is not silence, so backpressure never makes a healthy
// upstream look dead: the reader's progress (readerProgress) says whether it is
// blocked in Handler.Message or Flush now (busy), and whether it handed over a
// message since the previous wake-up (moved). A reader that moved was working, not
// waiting on a silent socket, at some instant after that wake-up: that counts as
// an inbound frame then, and answers an outstanding probe, which was sent at or
// before that wake-up. This takes no clock per message, where stamping the time
// after each message did. Since the instant is known only to the wake-up, a
// reader that drains a full read buffer slowly, never reading the socket for a
// whole interval, may be probed sooner than with a stamp per message; it is
// never declared dead while it hands messages over, and a silent connection is
// detected within the same bound, since its reader does not move.
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
	woke              time.Time // the previous wake-up (or the start of the watch)
	seen              uint64    // the reader's progress count then
}

type beat int

const (
	beatWait  beat = iota // nothing to do before the returned instant
	beatProbe             // send a probe now
	beatDead              // the connection is dead
)

// readerProgress is the reader's progress word: twice the number of messages
// (and Flushes) it has handed to the Handler, plus one while it is in
// Handler.Message or Flush. Only the reader changes it, with one atomic add
// before and one after each call; the heartbeat loads it at each wake-up.
type readerProgress uint64

func (p readerProgress) busy() bool    { return p&1 == 1 }
func (p readerProgress) count() uint64 { return uint64(p) >> 1 }

// next returns the action due at now given the last time bytes arrived and the
// reader's progress, and how long to wait before asking again.
func (h *heartbeat) next(now, lastRead time.Time, p readerProgress) (beat, time.Duration) {
	moved := p.count() != h.seen
	if moved && lastRead.Before(h.woke) {
		lastRead = h.woke
	}
	b, d := h.decide(now, lastRead, p.busy(), moved)
	if b == beatDead && h.late(now) {
		b, d = beatWait, h.recheck()
	}
	h.due = now.Add(d)
	h.woke, h.seen = now, p.count()
	return b, d
}

func (h *heartbeat) decide(now, lastRead time.Time, busy, moved bool) (beat, time.Duration) {
	if busy {
		h.probeSent = time.Time{}
		return beatWait, h.interval
	}
	if !h.probeSent.IsZero() {
		if moved || lastRead.After(h.probeSent) {
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
