package proxy

import (
	"fmt"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/sequence"
	"github.com/tetherproxy/tether/internal/template"
)

// Defaults for the zero values of Sequences (TETHER_GAP_TIMEOUT,
// TETHER_HOLD_MAX_BYTES).
const (
	DefaultGapTimeout   = sequence.DefaultGapTimeout
	DefaultHoldMaxBytes = sequence.DefaultHoldMaxBytes
)

// Sequences are the sequencing policy of docs/design.md "Sequences and gap
// filling": how a new connection asks the server to resume, how the feed
// numbers its messages, and what fills a gap. Which messages carry which
// numbers is the protocol's to say (Options.Rules' SeqPath and the fields
// beside it, or Options.Protocol). Each field follows the TETHER_* variable
// of the same name.
type Sequences struct {
	// ResumeMessage is sent on every new connection right after the login,
	// rendered with .Session, .LastSeq and .Stream: once per known stream
	// when the protocol names streams, once otherwise (see resume.go for
	// when it is left out).
	ResumeMessage template.ResumeMessage
	// SeqModel is how the feed numbers its messages (buffer.Model; zero:
	// next): under range a message covers the numbers from its first, under
	// chain it names the number of the one before it.
	SeqModel buffer.Model
	// SeqScope is where numbers count: per stream across connections (the
	// zero value), or per connection, starting over on each.
	SeqScope SeqScope
	// GapFillURL, with GapFill, fetches the missing numbers of a gap over
	// HTTP, rendered with .Session, .Stream, .From and .To. GapFill is
	// shared by every session of a Server and belongs to the caller, who
	// closes it after Shutdown; without it GapFillURL is not used.
	GapFillURL template.GapFillURL
	GapFill    *gapfill.Client
	// ResyncURL, with GapFill (the same client: credentials, limits),
	// fetches a stream's snapshot when a gap cannot be filled otherwise:
	// delivered as one message, it resets the stream to the number at
	// Options.Rules.ResyncSeqPath in it.
	ResyncURL template.ResyncURL
	// GapTimeout bounds the wait for a gap to be filled (0:
	// DefaultGapTimeout); GapPolicy says what happens then, and GapNotice
	// is the message GapNotify injects.
	GapTimeout time.Duration
	GapPolicy  GapPolicy
	GapNotice  template.GapNotice
	// HoldMaxBytes bounds the messages held behind gaps in a session (0:
	// DefaultHoldMaxBytes); a message that does not fit gets the gap policy
	// at once.
	HoldMaxBytes int
}

// SeqScope is where upstream numbers count (TETHER_SEQ_SCOPE):
// internal/sequence's Scope.
type SeqScope = sequence.Scope

// GapPolicy is what a session does with a gap not filled within the gap
// timeout, or one the hold buffer has no room to wait for
// (TETHER_GAP_POLICY): internal/sequence's Policy.
type GapPolicy = sequence.Policy

const (
	// GapClose closes the app with 1011 and the reason "unrecoverable gap in
	// stream S: missing F-T". The default: an app that cannot see a loss
	// should not go on as if nothing happened.
	GapClose = sequence.PolicyClose
	// GapSkip gives the numbers up and delivers on; the loss is logged and
	// counted.
	GapSkip = sequence.PolicySkip
	// GapNotify injects TETHER_GAP_NOTICE, rendered for the gap, then
	// delivers on.
	GapNotify = sequence.PolicyNotify
)

// seqRules is Sequences with what the hot path needs decided once: the
// policy, what the protocol says its messages carry, and the Config every
// session's Sequencer shares. A snapshot resets its stream only when the
// rules name both its pattern and its number (TETHER_RESYNC_MATCH,
// TETHER_RESYNC_SEQ_PATH).
type seqRules struct {
	Sequences
	on      bool // upstream messages are sequenced (TETHER_SEQ_PATH)
	fill    bool // gaps are fetched over HTTP
	capture bool // session ids are captured (TETHER_SESSION_MATCH and TETHER_SESSION_PATH)
	streams bool // numbers belong to named streams (TETHER_STREAM_PATH)
	config  sequence.Config
}

func newSeqRules(s Sequences, rs protocol.Rules, caps protocol.Capabilities) seqRules {
	if s.GapTimeout <= 0 {
		s.GapTimeout = DefaultGapTimeout
	}
	if s.HoldMaxBytes <= 0 {
		s.HoldMaxBytes = DefaultHoldMaxBytes
	}
	r := seqRules{
		Sequences: s,
		on:        caps.Sequences,
		capture:   caps.Sessions,
		streams:   caps.Streams,
	}
	r.fill = r.on && s.GapFillURL.IsSet() && s.GapFill != nil
	r.config = sequence.Config{
		GapTimeout:     s.GapTimeout,
		Policy:         s.GapPolicy,
		Notice:         s.GapNotice,
		HoldMaxBytes:   s.HoldMaxBytes,
		Model:          s.SeqModel,
		Scope:          s.SeqScope,
		Resyncs:        rs.ResyncMatch != nil && rs.ResyncSeqPath.String() != "",
		Resume:         s.ResumeMessage,
		PerStream:      r.streams,
		CaptureSession: r.capture,
	}
	if r.fill {
		r.config.Fetch = sequence.HTTPFetch(s.GapFill, s.GapFillURL, s.GapTimeout)
	}
	if r.on && s.ResyncURL.IsSet() && s.GapFill != nil && rs.ResyncSeqPath.String() != "" {
		r.config.Snapshot = sequence.HTTPSnapshot(s.GapFill, s.ResyncURL, s.GapTimeout, snapshotSeq(rs.ResyncSeqPath))
	}
	return r
}

// snapshotSeq reads the number a TETHER_RESYNC_URL snapshot resets its
// stream to, at path.
func snapshotSeq(path rules.Path) func([]byte) (int64, error) {
	return func(data []byte) (int64, error) {
		n, ok := path.Int(data)
		if !ok {
			return 0, fmt.Errorf("snapshot has no integer at TETHER_RESYNC_SEQ_PATH %q", path.String())
		}
		return n, nil
	}
}
