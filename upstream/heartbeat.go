package upstream

import (
	"context"
	"time"
)

// heartbeat decides when to probe a quiet connection and when to declare it dead
// (docs/design.md "Dead detection"). It holds no timer: the client's serve loop asks it
// what to do at each wake-up, so the rule is testable with plain timestamps.
//
// A connection is dead when PingTimeout passes after a probe with no inbound frame
// at all: data, pong or heartbeat reply all count. A probe goes out after every
// PingInterval of inbound silence, so an idle connection answering its probes is
// probed once per interval, and a peer that falls silent is declared dead at most
// PingInterval + PingTimeout after its last frame: while a probe waits for its
// answer, the heartbeat looks again at least once per interval. Time the reader spends handing
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
// A probe written behind a large backlog, to an upstream that reads slowly,
// is answered only when the upstream has read everything before it, which
// may take far longer than PingTimeout on a healthy connection. So write
// progress counts too (writeProgress): bytes the peer's TCP acknowledged
// between two wake-ups while a backlog waited at both count as an inbound
// frame at the first, like a reader that moved. Behind a backlog the peer
// takes bytes in only as it reads them (its receive window is what holds
// the backlog back), so that proves it reading; a blackhole acknowledges
// nothing, and is declared dead within the same bound, counted from its
// last acknowledgement. Without a backlog acknowledgements prove only that
// the peer's kernel is up (a hung server's kernel acknowledges the pings
// themselves), and are not counted: a probe is not held up then, and its
// answer decides. A hung server under a backlog is found once its receive
// buffer is full.
//
// A wake-up that comes much later than asked for means the whole process was
// stopped (a paused VM, a CPU-starved container): frames may be waiting in the
// socket that the reader has not had a chance to read. Such a wake-up never
// declares the connection dead; it looks again a moment later, when the reader
// has run.
//
// The reader alone can be the one that has not run: when the process has less
// CPU than its goroutines want, one woken by a timer (the heartbeat) runs
// before one woken by the network poller (the reader), so the timeout passes
// on time while the answer, and maybe a backlog before it, waits unread in the
// socket (measured under -race on a loaded machine: 100 to 744 KB waiting when
// a streaming connection was declared dead). Bytes waiting there (unread,
// which asks the kernel) never let the connection be declared dead either:
// the silence is tether's, not the peer's; it looks again a moment later.
// The writer likewise: frames waiting in tether's queue while the kernel's
// send queue is empty (unwritten; the kernel has sent everything it was
// given and seen it acknowledged, so nothing holds the writer back but
// the CPU) may hold the probe itself, which the peer cannot answer before
// it is sent (measured at load 20 on 2 cores: a writer that wrote 32 KiB of
// a restore's backlog, then not one byte for a second, its probe among
// what waited). A writer held back by the peer leaves bytes in the
// kernel's queue and is not behind.
//
// Both put the verdict off, but not for ever: a reader or writer that stays
// behind for maxDeferral in a row is stuck, not starved (a goroutine that
// waits for the CPU gets it within a few of the scheduler's rounds, and a
// process that gets none shows as late wake-ups, which put the verdict off
// without this bound), and a connection no goroutine of tether's reads or
// writes is of no use to the app; it is declared dead then, and a new one
// replaces it.
type heartbeat struct {
	interval, timeout time.Duration
	probeSent         time.Time     // zero when no probe is outstanding
	due               time.Time     // when the caller was asked to come back
	woke              time.Time     // the previous wake-up (or the start of the watch)
	seen              uint64        // the reader's progress count then
	written           writeProgress // the write progress then
	unread            func() bool   // bytes wait unread in the socket; nil: never asked
	unwritten         func() bool   // frames wait unwritten, the kernel's queue empty; nil: never asked
	// afterResume: the outstanding probe is a resume's (resumed), which
	// only an inbound frame answers: the reader's progress may finish a
	// message or Flush it was in at the resume, which proves nothing now.
	afterResume bool
	// deferred is when a dead verdict was first put off for a late wake-up
	// or a side behind; zero while none is.
	deferred time.Time
}

// maxDeferral is how long a dead verdict is put off, at most, while a side
// is behind: four timeouts, and never less than minDeferral, which no
// starved goroutine waits on a loaded machine.
func (h *heartbeat) maxDeferral() time.Duration { return max(4*h.timeout, minDeferral) }

const minDeferral = 5 * time.Second

// writeProgress is the transport's WriteProgress at one wake-up; the zero
// value (ok false) says nothing.
type writeProgress struct {
	acked       uint64
	backlog, ok bool
}

// proves reports whether the peer acknowledged bytes between then and w,
// behind a backlog that waited then.
func (w writeProgress) proves(then writeProgress) bool {
	return w.ok && then.ok && then.backlog && w.acked != then.acked
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

// next returns the action due at now given the last time bytes arrived, the
// reader's progress and the write progress, and how long to wait before
// asking again.
func (h *heartbeat) next(now, lastRead time.Time, p readerProgress, w writeProgress) (beat, time.Duration) {
	wrote := w.proves(h.written)
	moved := (p.count() != h.seen && !h.afterResume) || wrote
	h.written = w
	if moved && lastRead.Before(h.woke) {
		lastRead = h.woke
	}
	var b beat
	var d time.Duration
	if wrote && !p.busy() {
		b, d = h.probeBehindBacklog(now)
	} else {
		b, d = h.decide(now, lastRead, p.busy(), moved)
	}
	switch {
	case b != beatDead:
		h.deferred = time.Time{}
	case h.late(now):
		b, d = beatWait, h.recheck()
	case h.behind():
		if h.deferred.IsZero() {
			h.deferred = now
		}
		if now.Sub(h.deferred) < h.maxDeferral() {
			b, d = beatWait, h.recheck()
		}
	}
	if h.probeSent.IsZero() || b == beatProbe {
		h.afterResume = false // answered, or a probe of its own now
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
			// Look again within an interval, not only at the timeout: a
			// reply that arrives meanwhile starts a new interval of
			// silence, and the next probe is due at its end. Waiting for
			// the timeout instead sent probes only every max(interval,
			// timeout) and found a peer that died after its reply up to
			// two timeouts late.
			return beatWait, min(h.timeout-waited, h.interval)
		}
	}
	silence := now.Sub(lastRead)
	if silence >= h.interval {
		h.probeSent = now
		return beatProbe, min(h.timeout, h.interval)
	}
	return beatWait, h.interval - silence
}

// probeBehindBacklog probes at each wake-up, twice per timeout, while write
// progress proves the peer reading: the probes land in the backlog as it is
// written, and their answers come back as the peer reads through it, also
// once all of it is written and only the peer's buffers still hold some,
// where nothing is acknowledged any more. Spaced half a timeout apart in the
// stream, they keep answers coming well within the timeout of each other.
func (h *heartbeat) probeBehindBacklog(now time.Time) (beat, time.Duration) {
	h.probeSent = now
	return beatProbe, min(h.interval, h.timeout) / 2
}

// resumed is a wake-up right after the machine resumed from sleep
// (Resumes): whatever arrived before the sleep proves nothing now, so a
// probe goes out at once and the connection is dead unless something
// arrives within timeout. It returns how long to wait. The reader's
// progress and the write progress so far are taken as seen: only what
// happens from now on answers the probe, and of that only a frame read: a
// message the reader was handing over at the resume, or its Flush, ends
// after it without proving anything about the peer now (afterResume). A
// reader blocked in the Handler still puts the verdict off, as does a
// frame waiting unread.
func (h *heartbeat) resumed(now time.Time, p readerProgress, w writeProgress) time.Duration {
	h.probeSent, h.afterResume = now, true
	h.due = now.Add(h.timeout)
	h.woke, h.seen, h.written = now, p.count(), w
	return h.timeout
}

// late reports a wake-up more than half a timeout after it was due.
func (h *heartbeat) late(now time.Time) bool {
	return !h.due.IsZero() && now.Sub(h.due) > h.timeout/2
}

// behind reports bytes that arrived and wait unread (the reader has not run
// since), or frames that wait unwritten while the kernel has sent and seen
// acknowledged all it was given (the writer has not run since: the probe
// may be among them, not yet sent). Asked only before declaring the
// connection dead, so a healthy connection costs no system call for it.
func (h *heartbeat) behind() bool {
	return (h.unread != nil && h.unread()) || (h.unwritten != nil && h.unwritten())
}

// recheck is the short wait after a late wake-up, or one that finds the
// reader behind: long enough for the reader to drain what arrived while it
// did not run.
func (h *heartbeat) recheck() time.Duration {
	return min(h.timeout/4, 250*time.Millisecond) + time.Millisecond
}

// probe sends one heartbeat: the configured application message, or a
// WebSocket ping (also in its place until the login is out, with
// HeartbeatAfterLogin).
func (c *Client) probe(ctx context.Context, conn *Conn) {
	if len(c.opts.HeartbeatMessage) > 0 && (!c.opts.HeartbeatAfterLogin || conn.loggedIn.Load()) {
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
