package sequence

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

// Config is what every Sequencer of a server shares: the rules of
// docs/design.md "Sequences and gap filling" that act on a message once its
// Fields are read. Each field follows the TETHER_* variable it names.
type Config struct {
	// GapTimeout bounds the wait for a gap to be filled
	// (TETHER_GAP_TIMEOUT; 0: DefaultGapTimeout); Policy says what happens
	// then, and Notice is the message PolicyNotify injects
	// (TETHER_GAP_NOTICE, rendered with .Stream .From .To .Session).
	GapTimeout time.Duration
	Policy     Policy
	Notice     template.GapNotice
	// Model is how the feed numbers its messages (TETHER_SEQ_MODEL; the
	// zero value is buffer.ModelNext): what Fields.First and Fields.Prev
	// mean, and when a message follows its stream's last one.
	Model buffer.Model
	// Scope is where numbers count (TETHER_SEQ_SCOPE): per stream across
	// connections (the zero value), or per connection, starting over on
	// each.
	Scope Scope
	// Resyncs is set with TETHER_RESYNC_MATCH: a snapshot may reset a
	// stream after a reconnect. Without it, a resume or Fetch, a gap
	// across a reconnect cannot be filled and gets the policy at once.
	Resyncs bool
	// HoldMaxBytes bounds the messages held behind gaps
	// (TETHER_HOLD_MAX_BYTES; 0: DefaultHoldMaxBytes); a message that does
	// not fit gets the policy at once, as does one the session's memory
	// budget refuses (Options.Meter).
	HoldMaxBytes int
	// Resume is TETHER_RESUME_MESSAGE, rendered with .Session .LastSeq
	// .Stream by ResumeMessages; unset, no resume is asked for.
	Resume template.ResumeMessage
	// PerStream is set with TETHER_STREAM_PATH: one resume per known
	// stream, rather than one for the unnamed stream.
	PerStream bool
	// CaptureSession is set with TETHER_SESSION_MATCH and
	// TETHER_SESSION_PATH: nothing is resumed before a session id is
	// captured, since the server would not know what to resume.
	CaptureSession bool
	// EventIDs names each numbered message the Sequencer delivers without
	// a name of its own (Fields.EventID): EventID(stream, seq), the id an
	// sse:// app's event carries (buffer.SeqMessage.EventID).
	EventIDs bool
	// Fetch asks TETHER_GAPFILL_URL for a gap's numbers (HTTPFetch); nil:
	// gaps are left to the live stream, a resumed replay and the timeout.
	Fetch FetchFunc
	// Snapshot fetches a stream's snapshot (TETHER_RESYNC_URL:
	// HTTPSnapshot) when a gap cannot be filled otherwise; nil: such a gap
	// goes to the policy (snapshot.go).
	Snapshot SnapshotFunc
	// Clock reads the time and arms the gap timers; nil: System.
	Clock Clock
}

// withDefaults fills the zero values.
func (c Config) withDefaults() Config {
	if c.GapTimeout <= 0 {
		c.GapTimeout = DefaultGapTimeout
	}
	if c.HoldMaxBytes <= 0 {
		c.HoldMaxBytes = DefaultHoldMaxBytes
	}
	if c.Clock == nil {
		c.Clock = System
	}
	return c
}

// Options configures one Sequencer: the shared Config and what it needs
// from its session.
type Options struct {
	Config
	// App takes what the Sequencer releases. Required.
	App App
	// Classify reads a message fetched over HTTP as the session reads an
	// upstream message: its Fields, and whether the session's hiding rules
	// keep it from the app. It is called with the delivery turn held and
	// never with the Sequencer's lock. Required with Fetch.
	Classify func(data []byte) (f Fields, hidden bool)
	// Log gets the sequencing's lines (gaps, recoveries, duplicates);
	// nil: none.
	Log *zap.Logger
	// Metrics counts the sequencing's events; nil: none.
	Metrics Metrics
	// Meter is the session's account on tether's memory budget
	// (TETHER_MEMORY_LIMIT): the held bytes are reserved on it, and a
	// message it refuses is given the policy at once, as one beyond
	// HoldMaxBytes is (buffer.Tracker.SetMeter). Holding is not paused for
	// the budget: the reads it would pause are what fills the gap. nil:
	// not counted.
	Meter buffer.Meter
}

// App is where a Sequencer's output goes: the session's app socket. Its
// methods are called by whichever goroutine holds the delivery turn (the
// upstream reader, a gap timer, a catch-up), one at a time and in the order
// the tracker released the messages, and never with the Sequencer's lock
// held: they may block, which is the app's back-pressure, and may call into
// the session.
type App interface {
	// Deliver passes messages on to the app, in order; none is hidden. It
	// may keep them in a batch until Flush, and copies what it keeps: the
	// payloads may be reused once it returns. Once the app is closing it
	// drops the rest.
	Deliver(msgs []buffer.SeqMessage)
	// Flush queues what Deliver kept on the app's socket, blocking while
	// the socket's queue is full.
	Flush()
	// Close starts closing the app with a WebSocket close code and reason:
	// the close policy gave a gap up (CloseUnrecoverable).
	Close(code int, reason string)
}

// Metrics receives the sequencing's countable events; label values are
// internal/labels'. Its methods are called without any lock held and must
// not block. proxy.Metrics is one.
type Metrics interface {
	// DuplicateDropped counts an upstream message dropped as a duplicate.
	DuplicateDropped()
	// Gap counts a gap by outcome (labels.Gap*).
	Gap(outcome string)
	// Recovered counts a stream made whole by a method (labels.Recovery*).
	Recovered(method string)
	// HeldBytesChanged adds delta to the bytes held behind gaps.
	HeldBytesChanged(delta int)
}

// FetchRequest is one catch-up: the numbers of Gap, in the server's session
// Session (the latest captured id, "" before any).
type FetchRequest struct {
	Gap     buffer.Gap
	Session string
	// Deadline, in the Config's Clock, is when the catch-up stops being
	// useful: the gap's timeout, or a timeout of its own for a hole found
	// late in it. An answer after it is ignored.
	Deadline time.Time
}

// FetchFunc fetches the messages of a gap, in order. It runs in a goroutine
// of its own and must return once ctx ends: when the gap is filled or reset
// without it, or the Sequencer stops. A partial answer fills what it can;
// an error is logged, and no other fetch is made until the next gap is
// timed.
type FetchFunc func(ctx context.Context, r FetchRequest) ([][]byte, error)

type nopMetrics struct{}

func (nopMetrics) DuplicateDropped()    {}
func (nopMetrics) Gap(string)           {}
func (nopMetrics) Recovered(string)     {}
func (nopMetrics) HeldBytesChanged(int) {}
