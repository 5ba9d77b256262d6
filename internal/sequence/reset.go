package sequence

import (
	"fmt"
	"math"
	"strings"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// A stream whose numbering started over. Its numbers cannot be compared
// with the ones before, so without a reset every later message would be
// taken for a duplicate (numbers that went back) or held behind a gap that
// nothing can fill (numbers that jumped): a silent stall. A new epoch
// (TETHER_EPOCH_PATH) and numbers that went back on a new connection are
// resets: logged, counted under their reason (labels.GapEpoch,
// labels.GapRestart) and given to TETHER_GAP_POLICY, as a gap that cannot
// be filled would be. Under TETHER_SEQ_SCOPE=connection every new
// connection starts its streams over, which is the feed's contract, not a
// loss: logged at debug only.

// streamState is what the Sequencer remembers of a stream beside the
// tracker's numbers. Guarded by Sequencer.mu.
type streamState struct {
	name  string // the stream's name, its key in Sequencer.streams
	epoch string // the stream's TETHER_EPOCH_PATH value, "" before one
	gen   uint64 // the connection its last numbered message came from
	// newEpoch: a message without a number (a subscribe reply) brought a
	// new epoch; the stream's next number starts it over.
	newEpoch bool
}

// Why a stream was reset or a gap given up at once (log field "reason").
const (
	whyEpoch      = "epoch changed (TETHER_EPOCH_PATH)"
	whyRestart    = "numbers went back on a new connection"
	whyNewConn    = "numbers restart on each connection (TETHER_SEQ_SCOPE=connection)"
	whyUnfillable = "nothing can fill it (no TETHER_RESUME_MESSAGE, TETHER_GAPFILL_URL, TETHER_RESYNC_MATCH or TETHER_RESYNC_URL)"
)

// ResetError is a stream whose numbering started over, as the close policy
// closes the app with it (code 1011).
type ResetError struct {
	Stream string
	Why    string // what the log line gives as reason
}

// Error returns "stream S reset: why", or "stream reset: why" for the
// unnamed stream.
func (e *ResetError) Error() string {
	if e.Stream == "" {
		return "stream reset: " + e.Why
	}
	return fmt.Sprintf("stream %s reset: %s", e.Stream, e.Why)
}

// numberedLocked sequences a message that carries a number: the model's
// first number, then the checks that start its stream over, then the
// tracker. mu and turn are held.
func (s *Sequencer) numberedLocked(b *batch, src source, m buffer.SeqMessage, f Fields) {
	first, ok := s.firstOf(&f)
	m.Seq, m.First = f.Seq, first
	if !ok {
		// A chain link without a predecessor starts the chain (a Deribit
		// snapshot): the stream is reset to it.
		s.resyncLocked(b, f.Stream, m, src)
		return
	}
	last, seen := s.tracker.Last(f.Stream)
	st := s.stateLocked(f.Stream)
	// fresh: the stream's first number on this connection.
	fresh := seen && !src.http && st.gen != src.gen
	if !src.http {
		st.gen = src.gen
	}
	switch {
	case s.epochChangedLocked(st, f.Epoch, seen) || (st.newEpoch && seen):
		st.newEpoch = false
		s.resetLocked(b, f.Stream, m, src, labels.GapEpoch, whyEpoch)
	case fresh && s.cfg.Scope == ScopeConnection:
		s.restartLocked(b, f.Stream, m, src)
	case fresh && m.Seq < last && !s.cfg.Resume.IsSet():
		// Below the last number, on a connection no resume asked to
		// replay (whose overlap, like a welcome repeating L, is
		// duplicates): the server started its numbers over.
		s.resetLocked(b, f.Stream, m, src, labels.GapRestart, whyRestart)
	default:
		s.offerLocked(b, f.Stream, m, src, fresh)
	}
}

// firstOf is the lowest number a numbered message covers under the model
// (buffer.SeqMessage.First); false for a chain link without a predecessor,
// which starts its chain over.
func (s *Sequencer) firstOf(f *Fields) (int64, bool) {
	switch {
	case s.cfg.Model == buffer.ModelRange && f.HasFirst:
		return f.First, true
	case s.cfg.Model == buffer.ModelChain && !f.HasPrev:
		return f.Seq, false
	case s.cfg.Model == buffer.ModelChain && f.Prev == math.MaxInt64:
		return f.Prev, true
	case s.cfg.Model == buffer.ModelChain:
		return f.Prev + 1, true
	}
	return f.Seq, true
}

// stateLocked returns the state of stream, made on first sight.
func (s *Sequencer) stateLocked(stream string) *streamState {
	if st := s.knownLocked(stream); st != nil {
		return st
	}
	if s.streams == nil {
		s.streams = map[string]*streamState{}
	}
	st := &streamState{name: strings.Clone(stream)}
	s.streams[st.name] = st
	s.hot = st
	return st
}

// knownLocked returns the state of stream, nil when it was never seen. The
// stream of the last call is remembered, so that a feed of one stream, or
// of long runs of one, finds its state without a map lookup.
func (s *Sequencer) knownLocked(stream string) *streamState {
	if s.hot != nil && s.hot.name == stream {
		return s.hot
	}
	st := s.streams[stream]
	if st != nil {
		s.hot = st
	}
	return st
}

// unnumberedEpochLocked records the epoch a message without a number
// carries (Centrifugo's subscribe reply): a new one starts the stream over
// at its next number.
func (s *Sequencer) unnumberedEpochLocked(f Fields) {
	st := s.stateLocked(f.Stream)
	if s.epochChangedLocked(st, f.Epoch, true) {
		st.newEpoch = true
	}
}

// epochChangedLocked records epoch for st and reports whether it differs
// from the one the stream had; seen: the stream delivered before. A
// stream's first epoch is only recorded, and a message without one changes
// nothing.
func (s *Sequencer) epochChangedLocked(st *streamState, epoch string, seen bool) bool {
	if epoch == "" || st.epoch == epoch {
		return false
	}
	changed := seen && st.epoch != ""
	st.epoch = strings.Clone(epoch)
	return changed
}

// giveUpStreamLocked gives every open gap of stream up under the policy,
// with why: they belong to a numbering that ended. It returns false when
// the close policy closed the app.
func (s *Sequencer) giveUpStreamLocked(b *batch, stream, why string) bool {
	for {
		g, open := s.tracker.Gap(stream)
		if !open {
			return true
		}
		if !s.giveUpLocked(b, g, why) {
			return false
		}
	}
}

// resetLocked starts stream over at m's number, after giving its open gaps
// up: they belong to the old numbering, and what was held behind them
// arrived before m. The reset is reported under outcome (labels.GapEpoch,
// labels.GapRestart) and given to the policy: close closes the app; notify
// sends the notice, rendered with Reset set, ahead of m; skip delivers m.
// mu and turn are held.
func (s *Sequencer) resetLocked(b *batch, stream string, m buffer.SeqMessage, src source, outcome, why string) {
	if !s.giveUpStreamLocked(b, stream, why) {
		return
	}
	last, _ := s.tracker.Last(stream)
	b.event(event{kind: evReset, stream: stream, seq: m.Seq, from: last, gen: src.gen, outcome: outcome, why: why})
	switch s.cfg.Policy {
	case PolicyClose:
		s.failLocked(b, &ResetError{Stream: strings.Clone(stream), Why: why})
		return
	case PolicyNotify:
		s.noticeLocked(b, buffer.Gap{Stream: stream, From: last + 1, To: m.Seq - 1}, outcome)
	}
	s.tracker.Resync(stream, m, b.collect)
	delete(s.resumed, stream)
}

// restartLocked starts stream over at m's number on a new connection under
// TETHER_SEQ_SCOPE=connection: the gaps left open on the old connection
// are given up under the policy (nothing can fill them now), then m is
// delivered as the stream's first. mu and turn are held.
func (s *Sequencer) restartLocked(b *batch, stream string, m buffer.SeqMessage, src source) {
	if !s.giveUpStreamLocked(b, stream, whyNewConn) {
		return
	}
	last, _ := s.tracker.Last(stream)
	b.event(event{kind: evRestarted, stream: stream, seq: m.Seq, from: last, gen: src.gen})
	s.tracker.Resync(stream, m, b.collect)
}
