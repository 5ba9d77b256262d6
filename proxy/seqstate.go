package proxy

import (
	"strings"
	"sync"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

// seqState is one session's sequencing (DESIGN.md "Sequences and gap
// filling"): the tracker and hold buffer, the server's session id, the gaps
// being timed and filled, and the streams a resume message asked for.
//
// Ordering. Three kinds of goroutine deliver sequenced messages: the
// upstream reader, a gap timer applying the policy, and a gap fetch feeding
// what it got. Each runs the tracker under Session.mu and delivers what it
// released after unlocking, so mu is never held across a send to the app.
// That alone would let two of them deliver out of order (the reader takes
// 5 and 6 from the tracker, a timer then takes 8 and 9 and sends them
// first), so each also holds turn from its first tracker call until the
// last of its messages is queued on the app socket: output leaves in the
// order the tracker produced it. turn is always taken before mu, and only
// the app's write queue can block its holder, which is the back-pressure
// the upstream reader is meant to feel anyway.
//
// The upstream reader keeps the turn from the first message of a burst it
// read in one go until its Flush, before it waits for the socket: one lock
// per burst rather than per message. A timer or a fetch waits for the
// burst, which the reader is processing as fast as the app takes it.
//
// Everything from tracker on is guarded by Session.mu.
type seqState struct {
	turn       sync.Mutex
	readerTurn bool     // the upstream reader holds turn; only the reader touches it
	batch      seqBatch // the output of the turn's holder
	// out holds messages for the app until the upstream reader passes them
	// on (handler.go). Guarded by turn when sequencing, and the upstream
	// reader's alone otherwise; the zero appOut serves every session.
	out appOut

	tracker *buffer.Tracker
	// session is the latest captured session id, sessionGen the connection
	// it came from and prevSession the one captured before that connection:
	// what a resume on connection sessionGen asks for (resume.go).
	session, prevSession string
	sessionGen           uint64
	gaps                 map[string]*gapTrack // streams with held messages
	resumed              map[string]uint64    // stream → connection whose restore asked to resume it, until answered
	episodes             uint64               // numbers gap timeouts, so a stale timer knows it
	held                 int                  // held bytes last reported to Metrics
	dups                 dupReport
	failed               bool           // the close policy closed the app: nothing more is delivered
	closed               bool           // the session is ending: no new timer callback or fetch
	wg                   sync.WaitGroup // timer callbacks and fetches under way
}

// takeReaderTurn takes turn for the upstream reader, unless it holds it
// already. Only the reader calls it.
func (sq *seqState) takeReaderTurn() {
	if !sq.readerTurn {
		sq.turn.Lock()
		sq.readerTurn = true
	}
}

// releaseReaderTurn gives turn up at the reader's Flush, before it waits.
func (sq *seqState) releaseReaderTurn() {
	sq.readerTurn = false
	sq.turn.Unlock()
}

// init prepares the state of a session whose upstream messages are
// sequenced; the zero seqState serves sessions that are not.
func (sq *seqState) init(holdMaxBytes int) {
	sq.tracker = buffer.NewTracker(holdMaxBytes)
	sq.gaps = map[string]*gapTrack{}
	sq.resumed = map[string]uint64{}
}

// seqBatch is what one holder of seqState.turn produced: messages for the
// app, in order, and what to log, count and start once mu is released.
type seqBatch struct {
	out       []buffer.SeqMessage
	events    []seqEvent
	fetches   []*fetchJob
	closeErr  error // the close policy gave up on a gap: close the app with it
	heldDelta int
	collect   func(buffer.SeqMessage) // appends to out; made once
}

// reset empties the batch for a new turn, keeping its arrays.
func (b *seqBatch) reset() *seqBatch {
	if b.collect == nil {
		b.collect = func(m buffer.SeqMessage) { b.out = append(b.out, m) }
	}
	clear(b.out) // drop references to delivered payloads
	b.out, b.events, b.fetches = b.out[:0], b.events[:0], b.fetches[:0]
	b.closeErr, b.heldDelta = nil, 0
	return b
}

func (b *seqBatch) event(e seqEvent) { b.events = append(b.events, e) }

// dupReport counts duplicates between the info lines that surface them;
// each one is logged at debug only.
type dupReport struct {
	n    int
	last time.Time // when the last info line was written
}

// dupReportEvery spaces the "duplicates dropped" info lines: a resumed
// replay that overlaps what was delivered drops a burst at once, and a
// server that repeats itself steadily must not write a line per message.
const dupReportEvery = time.Second

// due takes the count when a line is due at now.
func (d *dupReport) due(now time.Time) int {
	if d.n == 0 || now.Sub(d.last) < dupReportEvery {
		return 0
	}
	return d.take(now)
}

// take returns the count and starts a new one.
func (d *dupReport) take(now time.Time) int {
	n := d.n
	d.n, d.last = 0, now
	return n
}

// capture records the session id found in a message from connection gen.
func (sq *seqState) capture(gen uint64, id string) {
	if gen != sq.sessionGen {
		sq.prevSession, sq.sessionGen = sq.session, gen
	}
	if id != sq.session {
		sq.session = strings.Clone(id)
	}
}

// resumeSession is the session a resume on connection gen asks for: the
// latest one captured on an earlier connection. A server that greets every
// new connection with a fresh session before the resume is answered (as a
// welcome on connect does) must not have that fresh id resumed.
func (sq *seqState) resumeSession(gen uint64) string {
	if sq.sessionGen == gen {
		return sq.prevSession
	}
	return sq.session
}

// resumeData returns what the resume messages for connection gen are
// rendered with, and records each stream as asked for on gen. There is
// nothing to resume, and so no message, when:
//   - TETHER_SESSION_MATCH is set and no session was captured yet (the
//     server would not know what to resume);
//   - TETHER_STREAM_PATH is set and no sequenced message arrived yet (one
//     message per known stream: none is known);
//   - neither rule gives anything: no session configured and no sequenced
//     message received, as on the first connection.
//
// With TETHER_STREAM_PATH unset and a session captured before any sequenced
// message, the message is rendered once with .LastSeq 0: the app has seen
// nothing, so everything the session holds is new to it.
func (sq *seqState) resumeData(gen uint64, r *seqRules) []template.Resume {
	session := sq.resumeSession(gen)
	if r.capture && session == "" {
		return nil
	}
	var out []template.Resume
	if isSet(r.StreamPath) {
		sq.tracker.ForEachStream(func(name string, last int64) {
			out = append(out, template.Resume{Session: session, LastSeq: last, Stream: name})
		})
	} else if last, ok := sq.tracker.Last(""); ok || session != "" {
		out = append(out, template.Resume{Session: session, LastSeq: last})
	}
	for _, d := range out {
		sq.resumed[d.Stream] = gen
	}
	return out
}

// resumeInFlight reports whether a resume asked for stream on a connection
// that has not answered it yet: a gap of that stream is then left to the
// resumed replay for a while before it is fetched over HTTP.
func (sq *seqState) resumeInFlight(stream string) bool {
	_, ok := sq.resumed[stream]
	return ok
}
