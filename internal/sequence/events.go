package sequence

import (
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/labels"
)

// eventKind is something the sequencing did that is logged or counted.
type eventKind uint8

const (
	evDuplicate      eventKind = iota // a duplicate dropped (debug)
	evDuplicates                      // duplicates dropped since the last such line (info)
	evGapOpened                       // a stream began to hold messages behind a gap
	evGapEnded                        // a timed gap was filled or reset by a resync
	evGivenUp                         // the gap policy gave a gap up
	evRecovered                       // a stream is whole again thanks to a recovery method
	evResumed                         // the connection a resume was sent on carried the stream on
	evResynced                        // a snapshot reset a stream
	evFetched                         // a catch-up answered (debug)
	evFetchFailed                     // a catch-up failed
	evNoticeFailed                    // TETHER_GAP_NOTICE did not render
	evReset                           // a stream's numbering started over
	evStale                           // held messages a delivered range covered, dropped (debug)
	evRestarted                       // a stream started over on a new connection (TETHER_SEQ_SCOPE=connection, debug)
	evSnapshotAsked                   // a snapshot was asked of TETHER_RESYNC_URL
	evSnapshotFailed                  // it failed or did not come in time
)

// event is one of them, recorded under the lock and reported after it.
// stream may point into the message being sequenced: it is cloned when it
// is logged, which happens while the message is still valid.
type event struct {
	kind     eventKind
	stream   string
	from, to int64
	seq      int64
	n        int
	gen      uint64
	outcome  string
	method   string
	why      string
	dur      time.Duration
	known    bool // evResynced: the stream had delivered messages before
	err      error
}

// emit logs and counts what a batch recorded. It runs without the lock.
func (s *Sequencer) emit(b *batch) {
	if b.heldDelta != 0 {
		s.metrics.HeldBytesChanged(b.heldDelta)
	}
	for i := range b.events {
		s.emitEvent(&b.events[i])
	}
	clear(b.events) // drop references to messages and errors
}

func (s *Sequencer) emitEvent(e *event) {
	switch e.kind {
	case evDuplicate:
		s.metrics.DuplicateDropped()
		if ce := s.log.Check(zapcore.DebugLevel, "duplicate dropped"); ce != nil {
			ce.Write(streamField(e.stream), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen))
		}
	case evDuplicates:
		s.log.Info("duplicates dropped", zap.Int("count", e.n))
	case evGapOpened:
		s.log.Info("gap opened", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to))
	case evGapEnded:
		s.gapEnded(e)
	case evGivenUp:
		s.givenUp(e)
	case evRecovered:
		s.metrics.Recovered(e.method)
	case evResumed:
		s.metrics.Recovered(labels.RecoveryResume)
		s.log.Info("stream resumed", streamField(e.stream), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen))
	case evResynced:
		s.resynced(e)
	case evFetched:
		s.log.Debug("gap fetched", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
			zap.Int("messages", e.n))
	case evFetchFailed:
		s.log.Warn("gap fetch failed", fetchFields(e)...)
	case evStale:
		for range e.n {
			s.metrics.DuplicateDropped()
		}
		s.log.Debug("stale held messages dropped", zap.Int("count", e.n))
	case evReset:
		s.reset(e)
	case evRestarted:
		if ce := s.log.Check(zapcore.DebugLevel, "stream restarted on a new connection"); ce != nil {
			ce.Write(streamField(e.stream), zap.Int64("seq_before", e.from), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen))
		}
	case evSnapshotAsked:
		s.log.Info("snapshot requested", streamField(e.stream))
	case evSnapshotFailed:
		s.metrics.Gap(e.outcome)
		s.log.Warn("snapshot failed", fetchFields(e)...)
	case evNoticeFailed:
		s.log.Error("gap notice not rendered, gap skipped without it", streamField(e.stream),
			zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to), zap.Error(e.err))
	}
}

// gapEnded reports a timed gap that closed: filled (by the live stream, a
// resumed replay or HTTP) or reset by a snapshot.
func (s *Sequencer) gapEnded(e *event) {
	s.metrics.Gap(e.outcome)
	if e.outcome != labels.GapFilled {
		return // a resync is logged as such
	}
	method := e.method
	if method == "" {
		method = "live"
	}
	s.log.Info("gap filled", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
		zap.String("method", method), zap.Duration("duration", e.dur))
}

// givenUp reports a gap the policy gave up: never silently.
func (s *Sequencer) givenUp(e *event) {
	s.metrics.Gap(e.outcome)
	fields := []zap.Field{streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
		zap.String("reason", e.why)}
	switch e.outcome {
	case labels.GapClosed:
		s.log.Warn("unrecoverable gap, closing app", append(fields, zap.Int("close_code", CloseUnrecoverable))...)
	case labels.GapNotified:
		s.log.Warn("gap given up, app notified", fields...)
	default:
		s.log.Warn("gap given up, skipped", fields...)
	}
}

// reset reports a stream whose numbering started over: counted under its
// reason, logged with what the policy does about it.
func (s *Sequencer) reset(e *event) {
	s.metrics.Gap(e.outcome)
	s.log.Warn("stream reset", streamField(e.stream), zap.String("reason", e.why),
		zap.Int64("seq_before", e.from), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen),
		zap.Stringer("policy", s.cfg.Policy))
}

func (s *Sequencer) resynced(e *event) {
	if e.known {
		s.metrics.Recovered(labels.RecoveryResync)
	}
	s.log.Info("stream resynced", streamField(e.stream), zap.Int64("seq", e.seq),
		zap.Int("held_dropped", e.n), zap.Uint64("gen", e.gen))
}

// fetchFields describe a failed catch-up; the URL is never logged, since
// it may carry a token.
func fetchFields(e *event) []zap.Field {
	fields := []zap.Field{streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to), zap.Error(e.err)}
	var se *gapfill.StatusError
	if errors.As(e.err, &se) {
		fields = append(fields, zap.Int("http_status", se.Status))
	}
	return fields
}

// streamField is the stream's name, copied: it may point into a message
// buffer that is reused once the message is delivered.
func streamField(s string) zap.Field { return zap.String("stream", strings.Clone(s)) }
