package sequence

import (
	"strings"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/template"
)

// A gap, from opening to its end. A held message opens a gapTrack for its
// stream (trackLocked); its first gap is timed (timeGapLocked, armLocked)
// and fetched (fetch.go). The live stream, a resumed replay, a fetch or a
// resync ends it (trackLocked again, endGapLocked); otherwise the timer
// fires (expired) and the policy gives it up (giveUpLocked): skip, notify
// with the rendered notice, or close, which finish turns into the app's
// close once the batch is delivered.

// gapTrack is a stream holding messages behind a gap. Its first gap is
// timed (TETHER_GAP_TIMEOUT) and, with Config.Fetch, fetched; when that gap
// is filled or given up and another remains, the next one gets a full
// timeout of its own. Guarded by Sequencer.mu.
type gapTrack struct {
	name     string
	first    buffer.Gap // the gap being timed, as it was when it became first
	since    time.Time  // when first became the first gap
	episode  uint64     // Sequencer.episodes when first became the first gap
	deadline time.Time
	timer    Timer
	// deferred: a resume asked the server for everything after the
	// stream's last number, so the gap is left to the resumed replay for
	// half the timeout before it is fetched over HTTP (docs/design.md: "a
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
	// snapshot is the TETHER_RESYNC_URL snapshot fetched for the gap, which
	// the timer then times (snapshot.go).
	snapshot *snapshotJob
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
	gt.stopSnapshot()
}

// gapCause is why a stream's gaps changed: what the caller just did.
type gapCause struct {
	outcome string // labels.GapFilled, GapResync, GapSkipped, GapNotified
	method  string // the recovery method of a fill: labels.RecoveryHTTP, RecoveryResume, or "" (the live stream)
	counted bool   // the outcome was logged and counted already (a policy)
	force   bool   // the timed gap ended whatever the numbers say (a resync)
}

// Why a gap was given up (log field "reason").
const (
	whyTimeout    = "not filled within TETHER_GAP_TIMEOUT"
	whyHoldFull   = "hold buffer full (TETHER_HOLD_MAX_BYTES)"
	whyBudgetFull = "memory budget full (TETHER_MEMORY_LIMIT)"
)

// trackLocked brings the gap bookkeeping of stream up to date after a
// tracker call: a timed gap that is behind the stream's last number ended
// (with cause's outcome), a stream that began to hold opened a track, a
// hole above everything seen so far is fetched. held is the message just
// held, the zero span when none was. mu is held.
func (s *Sequencer) trackLocked(b *batch, stream string, held span, cause gapCause, now time.Time) {
	gt := s.gaps[stream]
	last, _ := s.tracker.Last(stream)
	g, open := s.tracker.Gap(stream)
	if gt != nil && (cause.force || !open || last >= gt.first.To) {
		s.endGapLocked(b, gt, cause, now)
		if !open {
			s.dropTrackLocked(b, gt, cause)
			gt = nil
		} else {
			s.timeGapLocked(b, gt, g, now)
		}
	}
	if open && gt == nil {
		gt = &gapTrack{name: strings.Clone(stream), maxSeen: last, requested: last}
		if s.gaps == nil {
			s.gaps = map[string]*gapTrack{}
		}
		s.gaps[gt.name] = gt
		b.event(event{kind: evGapOpened, stream: gt.name, from: g.From, to: g.To})
		s.timeGapLocked(b, gt, g, now)
	}
	if gt == nil {
		return
	}
	if held.first > gt.maxSeen+1 {
		s.requestLocked(b, gt, buffer.Gap{Stream: gt.name, From: gt.maxSeen + 1, To: held.first - 1})
	}
	gt.maxSeen = max(gt.maxSeen, held.last, last)
}

// span is the numbers a held message covers: first to last, first = last
// but under TETHER_SEQ_MODEL range and chain (buffer.SeqMessage.First).
type span struct{ first, last int64 }

// endGapLocked closes the timed gap of gt with cause.
func (s *Sequencer) endGapLocked(b *batch, gt *gapTrack, cause gapCause, now time.Time) {
	if gt.timer != nil {
		gt.timer.Stop()
		gt.timer = nil
	}
	gt.stopSnapshot() // the gap it was for is over
	if cause.counted {
		return
	}
	b.event(event{kind: evGapEnded, stream: gt.name, from: gt.first.From, to: gt.first.To,
		outcome: cause.outcome, method: cause.method, dur: now.Sub(gt.since)})
}

// dropTrackLocked forgets a stream that holds nothing any more. When its
// last gap was filled by a recovery method, the stream is whole again
// thanks to it: one recovery.
func (s *Sequencer) dropTrackLocked(b *batch, gt *gapTrack, cause gapCause) {
	gt.stop()
	delete(s.gaps, gt.name)
	if cause.outcome != labels.GapFilled || cause.method == "" {
		return
	}
	if cause.method == labels.RecoveryResume {
		delete(s.resumed, gt.name)
	}
	b.event(event{kind: evRecovered, stream: gt.name, method: cause.method})
}

// timeGapLocked makes g the timed gap of gt: a full timeout from now, and a
// fetch of what is not asked for yet (after half the timeout when a resume
// may fill it first).
func (s *Sequencer) timeGapLocked(b *batch, gt *gapTrack, g buffer.Gap, now time.Time) {
	timeout := s.cfg.GapTimeout
	s.episodes++
	gt.episode, gt.first, gt.since = s.episodes, g, now
	gt.deadline = now.Add(timeout)
	gt.fetchFailed = false
	gt.deferred = s.cfg.Fetch != nil && s.resumeInFlightLocked(gt.name)
	if gt.deferred {
		s.armLocked(gt, timeout/2)
		gt.addPending(g)
		return
	}
	s.armLocked(gt, timeout)
	s.requestLocked(b, gt, g)
}

// armLocked (re)starts gt's timer for its current episode.
func (s *Sequencer) armLocked(gt *gapTrack, d time.Duration) {
	if gt.timer != nil {
		gt.timer.Stop()
	}
	if s.closed {
		gt.timer = nil
		return
	}
	ep := gt.episode
	gt.timer = s.clock.AfterFunc(d, func() { s.expired(gt, ep) })
}

// undeferLocked stops waiting for a resumed replay: what is missing is
// fetched now, and the timer runs to the gap's deadline.
func (s *Sequencer) undeferLocked(b *batch, gt *gapTrack) {
	gt.deferred = false
	s.armLocked(gt, max(gt.deadline.Sub(s.clock.Now()), 0))
	if gt.hasPending {
		p := gt.pending
		gt.hasPending = false
		s.requestLocked(b, gt, p)
	}
}

// expired runs when gt's timer fires: the end of a deferral, a snapshot not
// answered in time, or a gap not filled in time, which a snapshot
// (TETHER_RESYNC_URL) or the policy settles. A timer of an episode that
// ended meanwhile finds nothing to do.
func (s *Sequencer) expired(gt *gapTrack, episode uint64) {
	if !s.enter() {
		return
	}
	defer s.wg.Done()
	s.turn.Lock()
	defer s.turn.Unlock()
	b := s.batch.reset()
	s.mu.Lock()
	if s.gaps[gt.name] == gt && gt.episode == episode && !s.failed && !s.closed {
		switch g, ok := s.tracker.Gap(gt.name); {
		case gt.snapshot != nil:
			s.snapshotLateLocked(gt)
		case gt.deferred:
			s.undeferLocked(b, gt)
		case ok && !s.snapshotLocked(b, gt):
			s.giveUpLocked(b, g, whyTimeout)
		}
	}
	s.noteHeldLocked(b)
	s.mu.Unlock()
	s.finish(b, true)
}

// enter registers a timer callback, unless the Sequencer is stopping: Stop
// waits for every registered one.
func (s *Sequencer) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// giveUpLocked applies TETHER_GAP_POLICY to gap g, which could not be filled
// in time or waited for. Under skip and notify the numbers are given up
// (the notice first) and the stream moves on; under close nothing more is
// delivered, the app is closed with 1011 once the batch is delivered
// (finish), and giveUpLocked returns false.
func (s *Sequencer) giveUpLocked(b *batch, g buffer.Gap, why string) bool {
	switch s.cfg.Policy {
	case PolicySkip, PolicyNotify:
		outcome := labels.GapSkipped
		if s.cfg.Policy == PolicyNotify {
			outcome = labels.GapNotified
			s.noticeLocked(b, g, "")
		}
		s.tracker.Skip(g, b.collect)
		b.event(event{kind: evGivenUp, stream: g.Stream, from: g.From, to: g.To, outcome: outcome, why: why})
		// force: the timed gap ended even when what was given up is only
		// the part of it before a held message inside it (a hole filled
		// in its middle); the rest is timed anew, or it would never be.
		s.trackLocked(b, g.Stream, span{}, gapCause{outcome: outcome, counted: true, force: true}, s.clock.Now())
		return true
	}
	b.event(event{kind: evGivenUp, stream: g.Stream, from: g.From, to: g.To, outcome: labels.GapClosed, why: why})
	s.failLocked(b, g.Err())
	return false
}

// failLocked ends the sequencing under the close policy: nothing more is
// delivered, and finish closes the app with err once the batch is.
func (s *Sequencer) failLocked(b *batch, err error) {
	s.failed = true
	b.closeErr = err
	for _, gt := range s.gaps {
		gt.stop()
	}
}

// noticeLocked queues TETHER_GAP_NOTICE for g ahead of what comes after the
// gap; reset is why the stream started over, "" for a gap. A notice that
// fails to render is logged, and the gap is given up all the same: holding
// the stream for ever would be worse.
func (s *Sequencer) noticeLocked(b *batch, g buffer.Gap, reset string) {
	notice, err := s.cfg.Notice.Render(template.Gap{
		Stream: g.Stream, From: g.From, To: g.To, Session: s.session, Reset: reset,
	})
	if err != nil {
		b.event(event{kind: evNoticeFailed, stream: g.Stream, from: g.From, to: g.To, err: err})
		return
	}
	b.out = append(b.out, buffer.SeqMessage{Message: buffer.Message{Data: notice}})
}
