package proxy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/template"
)

// Defaults for the zero values of Sequences (TETHER_GAP_TIMEOUT,
// TETHER_HOLD_MAX_BYTES).
const (
	DefaultGapTimeout   = 5 * time.Second
	DefaultHoldMaxBytes = 8 << 20
)

// Sequences are the rules of DESIGN.md "Sequences and gap filling": which
// upstream messages are numbered, how a new connection asks the server to
// resume, and what fills a gap. Each field follows the TETHER_* variable of
// the same name. Without SeqPath nothing is sequenced, and a session with no
// rule at all never looks inside a message.
type Sequences struct {
	// SessionMatch and SessionPath capture the server's session id from the
	// upstream messages matching SessionMatch (a welcome): .Session in
	// ResumeMessage and GapFillURL.
	SessionMatch *rules.Matcher
	SessionPath  rules.Path
	// ResumeMessage is sent on every new connection right after the login,
	// rendered with .Session, .LastSeq and .Stream: once per known stream
	// when StreamPath is set, once otherwise (see resume.go for when it is
	// left out).
	ResumeMessage template.ResumeMessage
	// SeqPath is where upstream messages carry their integer sequence
	// number; StreamPath, when set, names the stream each number belongs to
	// (a message without a value there belongs to the unnamed stream).
	SeqPath    rules.Path
	StreamPath rules.Path
	// ResyncMatch matches a message (a snapshot, a welcome with resync:true)
	// that resets its stream to the number at ResyncSeqPath. It is
	// delivered, and never taken for a duplicate.
	ResyncMatch   *rules.Matcher
	ResyncSeqPath rules.Path
	// GapFillURL, with GapFill, fetches the missing numbers of a gap over
	// HTTP. GapFill is shared by every session of a Server and belongs to
	// the caller, who closes it after Shutdown; without it GapFillURL is not
	// used.
	GapFillURL template.GapFillURL
	GapFill    *gapfill.Client
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

// GapPolicy is what a session does with a gap not filled within the gap
// timeout, or one the hold buffer has no room to wait for
// (TETHER_GAP_POLICY).
type GapPolicy int

const (
	// GapClose closes the app with 1011 and the reason "unrecoverable gap in
	// stream S: missing F-T". The default: an app that cannot see a loss
	// should not go on as if nothing happened.
	GapClose GapPolicy = iota
	// GapSkip gives the numbers up and delivers on; the loss is logged and
	// counted.
	GapSkip
	// GapNotify injects TETHER_GAP_NOTICE, rendered for the gap, then
	// delivers on.
	GapNotify
)

var gapPolicyNames = [...]string{GapClose: "close", GapSkip: "skip", GapNotify: "notify"}

// String returns close, skip or notify.
func (p GapPolicy) String() string {
	if p < 0 || int(p) >= len(gapPolicyNames) {
		return "GapPolicy(" + strconv.Itoa(int(p)) + ")"
	}
	return gapPolicyNames[p]
}

// UnmarshalText parses close, skip or notify.
func (p *GapPolicy) UnmarshalText(text []byte) error {
	for i, name := range gapPolicyNames {
		if string(text) == name {
			*p = GapPolicy(i)
			return nil
		}
	}
	return fmt.Errorf("unknown gap policy %q: want close, skip or notify", text)
}

// seqRules is Sequences with what the hot path needs decided once.
type seqRules struct {
	Sequences
	on      bool // SeqPath is set: upstream messages are sequenced
	fill    bool // gaps are fetched over HTTP
	capture bool // SessionMatch and SessionPath are set
	resync  bool // ResyncMatch and ResyncSeqPath are set
	fields  fieldReader
}

func newSeqRules(s Sequences) seqRules {
	if s.GapTimeout <= 0 {
		s.GapTimeout = DefaultGapTimeout
	}
	if s.HoldMaxBytes <= 0 {
		s.HoldMaxBytes = DefaultHoldMaxBytes
	}
	r := seqRules{
		Sequences: s,
		on:        isSet(s.SeqPath),
		capture:   s.SessionMatch != nil && isSet(s.SessionPath),
		resync:    s.ResyncMatch != nil && isSet(s.ResyncSeqPath),
	}
	r.fill = r.on && s.GapFillURL.IsSet() && s.GapFill != nil
	r.fields = newFieldReader(s.SeqPath, s.StreamPath, s.SessionPath, s.ResyncSeqPath)
	return r
}

// fetchBackoff is the wait before retry n of a gap fetch: a tenth of the
// gap timeout, doubling, at most a quarter of it, so a few retries fit in
// the timeout and the last one still has time to be answered.
func (r *seqRules) fetchBackoff(attempt int) time.Duration {
	d := r.GapTimeout / 10
	for i := 1; i < attempt && d < r.GapTimeout/4; i++ {
		d *= 2
	}
	return min(d, r.GapTimeout/4)
}
