package proxy

import (
	"strings"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

// gapTrack is a stream holding messages behind a gap. Its first gap is
// timed (TETHER_GAP_TIMEOUT) and, with TETHER_GAPFILL_URL, fetched; when
// that gap is filled or given up and another remains, the next one gets a
// full timeout of its own. Guarded by Session.mu.
type gapTrack struct {
	name     string
	first    buffer.Gap // the gap being timed, as it was when it became first
	since    time.Time  // when first became the first gap
	episode  uint64     // seqState.episodes when first became the first gap
	deadline time.Time
	timer    *time.Timer
	// deferred: a resume asked the server for everything after the
	// stream's last number, so the gap is left to the resumed replay for
	// half the timeout before it is fetched over HTTP (DESIGN.md: "a
	// resumed replay" is preferred to TETHER_GAPFILL_URL).
	deferred bool
	// maxSeen is the highest number seen since the stream began to hold:
	// a held message above maxSeen+1 reveals a new hole to fetch.
	maxSeen int64
	// requested is the highest number asked of TETHER_GAPFILL_URL; at most
	// one fetch is in flight, the holes found meanwhile wait, merged, in
	// pending.
	requested   int64
	fetching    *fetchJob
	pending     buffer.Gap
	hasPending  bool
	fetchFailed bool // a fetch failed: no other until the next gap is timed
}

func (gt *gapTrack) addPending(g buffer.Gap) {
	if !gt.hasPending {
		gt.pending, gt.hasPending = g, true
		return
	}
	gt.pending.From = min(gt.pending.From, g.From)
	gt.pending.To = max(gt.pending.To, g.To)
}

// stop ends the track's timer and fetch.
func (gt *gapTrack) stop() {
	if gt.timer != nil {
		gt.timer.Stop()
	}
	if gt.fetching != nil {
		gt.fetching.cancel()
	}
}

// gapCause is why a stream's gaps changed: what the caller just did.
type gapCause struct {
	outcome string // GapFilled, GapResync, GapSkipped, GapNotified
	method  string // the recovery method of a fill: RecoveryHTTP, RecoveryResume, or "" (the live stream)
	counted bool   // the outcome was logged and counted already (a policy)
	force   bool   // the timed gap ended whatever the numbers say (a resync)
}

// Why a gap was given up (log field "reason").
const (
	whyTimeout  = "not filled within TETHER_GAP_TIMEOUT"
	whyHoldFull = "hold buffer full (TETHER_HOLD_MAX_BYTES)"
)

// trackLocked brings the gap bookkeeping of stream up to date after a
// tracker call: a timed gap that is behind the stream's last number ended
// (with cause's outcome), a stream that began to hold opened a track, a
// hole above everything seen so far is fetched. held is the number of the
// message just held, 0 when none was. sess.mu is held.
func (sess *Session) trackLocked(b *seqBatch, stream string, held int64, cause gapCause, now time.Time) {
	sq := &sess.seq
	gt := sq.gaps[stream]
	last, _ := sq.tracker.Last(stream)
	g, open := sq.tracker.Gap(stream)
	if gt != nil && (cause.force || !open || last >= gt.first.To) {
		sess.endGapLocked(b, gt, cause, now)
		if !open {
			sess.dropTrackLocked(b, gt, cause)
			gt = nil
		} else {
			sess.timeGapLocked(b, gt, g, now)
		}
	}
	if open && gt == nil {
		gt = &gapTrack{name: strings.Clone(stream), maxSeen: last, requested: last}
		sq.gaps[gt.name] = gt
		b.event(seqEvent{kind: evGapOpened, stream: gt.name, from: g.From, to: g.To})
		sess.timeGapLocked(b, gt, g, now)
	}
	if gt == nil {
		return
	}
	if held > gt.maxSeen+1 {
		sess.requestLocked(b, gt, buffer.Gap{Stream: gt.name, From: gt.maxSeen + 1, To: held - 1})
	}
	gt.maxSeen = max(gt.maxSeen, held, last)
}

// endGapLocked closes the timed gap of gt with cause.
func (sess *Session) endGapLocked(b *seqBatch, gt *gapTrack, cause gapCause, now time.Time) {
	if gt.timer != nil {
		gt.timer.Stop()
		gt.timer = nil
	}
	if cause.counted {
		return
	}
	b.event(seqEvent{kind: evGapEnded, stream: gt.name, from: gt.first.From, to: gt.first.To,
		outcome: cause.outcome, method: cause.method, dur: now.Sub(gt.since)})
}

// dropTrackLocked forgets a stream that holds nothing any more. When its
// last gap was filled by a recovery method, the stream is whole again
// thanks to it: one recovery.
func (sess *Session) dropTrackLocked(b *seqBatch, gt *gapTrack, cause gapCause) {
	sq := &sess.seq
	gt.stop()
	delete(sq.gaps, gt.name)
	if cause.outcome != GapFilled || cause.method == "" {
		return
	}
	if cause.method == RecoveryResume {
		delete(sq.resumed, gt.name)
	}
	b.event(seqEvent{kind: evRecovered, stream: gt.name, method: cause.method})
}

// timeGapLocked makes g the timed gap of gt: a full timeout from now, and a
// fetch of what is not asked for yet (after half the timeout when a resume
// may fill it first).
func (sess *Session) timeGapLocked(b *seqBatch, gt *gapTrack, g buffer.Gap, now time.Time) {
	r := &sess.srv.rules.seq
	sq := &sess.seq
	sq.episodes++
	gt.episode, gt.first, gt.since = sq.episodes, g, now
	gt.deadline = now.Add(r.GapTimeout)
	gt.fetchFailed = false
	gt.deferred = r.fill && sq.resumeInFlight(gt.name)
	if gt.deferred {
		sess.armLocked(gt, r.GapTimeout/2)
		gt.addPending(g)
		return
	}
	sess.armLocked(gt, r.GapTimeout)
	sess.requestLocked(b, gt, g)
}

// armLocked (re)starts gt's timer for its current episode.
func (sess *Session) armLocked(gt *gapTrack, d time.Duration) {
	if gt.timer != nil {
		gt.timer.Stop()
	}
	if sess.seq.closed {
		gt.timer = nil
		return
	}
	ep := gt.episode
	gt.timer = time.AfterFunc(d, func() { sess.gapExpired(gt, ep) })
}

// undeferLocked stops waiting for a resumed replay: what is missing is
// fetched now, and the timer runs to the gap's deadline.
func (sess *Session) undeferLocked(b *seqBatch, gt *gapTrack) {
	gt.deferred = false
	sess.armLocked(gt, max(time.Until(gt.deadline), 0))
	if gt.hasPending {
		p := gt.pending
		gt.hasPending = false
		sess.requestLocked(b, gt, p)
	}
}

// gapExpired runs when gt's timer fires: the end of a deferral, or a gap
// not filled in time, which the policy settles.
func (sess *Session) gapExpired(gt *gapTrack, episode uint64) {
	if !sess.enterSeq() {
		return
	}
	sq := &sess.seq
	defer sq.wg.Done()
	sq.turn.Lock()
	defer sq.turn.Unlock()
	b := sq.batch.reset()
	sess.mu.Lock()
	if sq.gaps[gt.name] == gt && gt.episode == episode && !sq.failed && !sq.closed {
		if gt.deferred {
			sess.undeferLocked(b, gt)
		} else if g, ok := sq.tracker.Gap(gt.name); ok {
			sess.giveUpLocked(b, g, whyTimeout)
		}
	}
	sess.heldLocked(b)
	sess.mu.Unlock()
	sess.flush(b)
}

// enterSeq registers a timer callback with the session, unless it is
// ending: stopSequencing waits for every registered one.
func (sess *Session) enterSeq() bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.seq.closed {
		return false
	}
	sess.seq.wg.Add(1)
	return true
}

// giveUpLocked applies TETHER_GAP_POLICY to gap g, which could not be filled
// in time or waited for. Under skip and notify the numbers are given up
// (the notice first) and the stream moves on; under close nothing more is
// delivered and the app is closed with 1011 once the batch is flushed, and
// giveUpLocked returns false.
func (sess *Session) giveUpLocked(b *seqBatch, g buffer.Gap, why string) bool {
	sq := &sess.seq
	policy := sess.srv.rules.seq.GapPolicy
	switch policy {
	case GapSkip, GapNotify:
		outcome := GapSkipped
		if policy == GapNotify {
			outcome = GapNotified
			sess.noticeLocked(b, g)
		}
		sq.tracker.Skip(g, b.collect)
		b.event(seqEvent{kind: evGivenUp, stream: g.Stream, from: g.From, to: g.To, outcome: outcome, why: why})
		sess.trackLocked(b, g.Stream, 0, gapCause{outcome: outcome, counted: true}, time.Now())
		return true
	}
	sq.failed = true
	b.closeErr = g.Err()
	b.event(seqEvent{kind: evGivenUp, stream: g.Stream, from: g.From, to: g.To, outcome: GapClosed, why: why})
	for _, gt := range sq.gaps {
		gt.stop()
	}
	return false
}

// noticeLocked queues TETHER_GAP_NOTICE for g ahead of what comes after the
// gap. A notice that fails to render is logged, and the gap is given up all
// the same: holding the stream for ever would be worse.
func (sess *Session) noticeLocked(b *seqBatch, g buffer.Gap) {
	notice, err := sess.srv.rules.seq.GapNotice.Render(template.Gap{
		Stream: g.Stream, From: g.From, To: g.To, Session: sess.seq.session,
	})
	if err != nil {
		b.event(seqEvent{kind: evNoticeFailed, stream: g.Stream, from: g.From, to: g.To, err: err})
		return
	}
	b.out = append(b.out, buffer.SeqMessage{Message: buffer.Message{Data: notice}})
}

// stopSequencing ends the session's sequencing once its upstream reader is
// gone: timers stop, fetches are cancelled (the session's context already
// is), and it waits for the callbacks and fetches under way. The bytes
// still held leave the gauge, and the duplicates not surfaced yet are.
func (sess *Session) stopSequencing() {
	if !sess.srv.rules.seq.on {
		return
	}
	sq := &sess.seq
	sess.mu.Lock()
	sq.closed = true
	for _, gt := range sq.gaps {
		gt.stop()
	}
	sess.mu.Unlock()
	sq.wg.Wait()
	b := &seqBatch{}
	sess.mu.Lock()
	b.heldDelta = -sq.held
	sq.held = 0
	if n := sq.dups.take(time.Now()); n > 0 {
		b.event(seqEvent{kind: evDuplicates, n: n})
	}
	sess.mu.Unlock()
	sess.emit(b)
}
