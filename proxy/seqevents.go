package proxy

import (
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tetherproxy/tether/internal/gapfill"
)

// seqEventKind is something the sequencing did that is logged or counted.
type seqEventKind uint8

const (
	evDuplicate    seqEventKind = iota // a duplicate dropped (debug)
	evDuplicates                       // duplicates dropped since the last such line (info)
	evGapOpened                        // a stream began to hold messages behind a gap
	evGapEnded                         // a timed gap was filled or reset by a resync
	evGivenUp                          // the gap policy gave a gap up
	evRecovered                        // a stream is whole again thanks to a recovery method
	evResumed                          // the connection a resume was sent on carried the stream on
	evResynced                         // a snapshot reset a stream
	evFetched                          // a catch-up answered (debug)
	evFetchFailed                      // a catch-up failed
	evNoticeFailed                     // TETHER_GAP_NOTICE did not render
)

// seqEvent is one of them, recorded under the lock and reported after it.
// stream may point into the message being sequenced: it is cloned when it
// is logged, which happens while the message is still valid.
type seqEvent struct {
	kind     seqEventKind
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
func (sess *Session) emit(b *seqBatch) {
	m := sess.srv.opts.Metrics
	if b.heldDelta != 0 {
		m.HeldBytesChanged(b.heldDelta)
	}
	for i := range b.events {
		sess.emitEvent(m, &b.events[i])
	}
	clear(b.events) // drop references to messages and errors
}

func (sess *Session) emitEvent(m Metrics, e *seqEvent) {
	switch e.kind {
	case evDuplicate:
		m.DuplicateDropped()
		if ce := sess.log.Check(zapcore.DebugLevel, "duplicate dropped"); ce != nil {
			ce.Write(streamField(e.stream), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen))
		}
	case evDuplicates:
		sess.log.Info("duplicates dropped", zap.Int("count", e.n))
	case evGapOpened:
		sess.log.Info("gap opened", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to))
	case evGapEnded:
		sess.gapEnded(m, e)
	case evGivenUp:
		sess.givenUp(m, e)
	case evRecovered:
		m.Recovered(e.method)
	case evResumed:
		m.Recovered(RecoveryResume)
		sess.log.Info("stream resumed", streamField(e.stream), zap.Int64("seq", e.seq), zap.Uint64("gen", e.gen))
	case evResynced:
		sess.resynced(m, e)
	case evFetched:
		sess.log.Debug("gap fetched", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
			zap.Int("messages", e.n))
	case evFetchFailed:
		sess.log.Warn("gap fetch failed", fetchFields(e)...)
	case evNoticeFailed:
		sess.log.Error("gap notice not rendered, gap skipped without it", streamField(e.stream),
			zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to), zap.Error(e.err))
	}
}

// gapEnded reports a timed gap that closed: filled (by the live stream, a
// resumed replay or HTTP) or reset by a snapshot.
func (sess *Session) gapEnded(m Metrics, e *seqEvent) {
	m.Gap(e.outcome)
	if e.outcome != GapFilled {
		return // a resync is logged as such
	}
	method := e.method
	if method == "" {
		method = "live"
	}
	sess.log.Info("gap filled", streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
		zap.String("method", method), zap.Duration("duration", e.dur))
}

// givenUp reports a gap the policy gave up: never silently.
func (sess *Session) givenUp(m Metrics, e *seqEvent) {
	m.Gap(e.outcome)
	fields := []zap.Field{streamField(e.stream), zap.Int64("gap_from", e.from), zap.Int64("gap_to", e.to),
		zap.String("reason", e.why)}
	switch e.outcome {
	case GapClosed:
		sess.log.Warn("unrecoverable gap, closing app", append(fields, zap.Int("close_code", 1011))...)
	case GapNotified:
		sess.log.Warn("gap given up, app notified", fields...)
	default:
		sess.log.Warn("gap given up, skipped", fields...)
	}
}

func (sess *Session) resynced(m Metrics, e *seqEvent) {
	if e.known {
		m.Recovered(RecoveryResync)
	}
	sess.log.Info("stream resynced", streamField(e.stream), zap.Int64("seq", e.seq),
		zap.Int("held_dropped", e.n), zap.Uint64("gen", e.gen))
}

// fetchFields describe a failed catch-up; the URL is never logged, since
// it may carry a token.
func fetchFields(e *seqEvent) []zap.Field {
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
