package upstream

import (
	"errors"
	"sync"
	"time"

	"github.com/tetherproxy/tether/internal/labels"
)

// Status is a Client's upstream connection as an operator's status page
// shows it: where it stands, what ended its last connection or dial, and
// what happened lately. It holds no URL, header, token or message content:
// failures are named by the Observer's bounded labels, plus the close code
// and reason and the HTTP status the upstream itself sent.
type Status struct {
	State State
	// Gen counts the connections dialled so far, the current one included.
	Gen uint64
	// Attempt is the number of failed attempts in a row since the last
	// confirmation, 0 while confirmed (the backoff's attempt counter).
	Attempt int
	// NextRetry is when the next dial starts, while State is StateWaiting;
	// zero otherwise.
	NextRetry time.Time
	// DownSince is when the app last had a confirmed connection, or when the
	// Client started if it never had one; zero while confirmed.
	DownSince time.Time
	// Reconnects counts confirmations that followed the loss of a
	// confirmed connection: outages the app lived through.
	Reconnects int
	// LastFailure is the latest failed dial or lost connection; its Kind is
	// "" before the first.
	LastFailure Event
	// LastClose is the latest connection the upstream ended with a close
	// frame (Reason "close"), however many failures followed it; its Kind
	// is "" before the first.
	LastClose Event
	// GaveUp names why the Client stopped for good ("" while it runs or
	// after Close): the Observer label of the failure, e.g. "close",
	// "http_401", "tls".
	GaveUp string
	// Recent are the latest events, oldest first, at most RecentEvents.
	Recent []Event
}

// RecentEvents is how many events a Status keeps.
const RecentEvents = 10

// EventKind is what happened to a Client's connection.
type EventKind string

// Event kinds.
const (
	EventDialFailed EventKind = "dial_failed" // a dial did not open a connection
	EventLost       EventKind = "lost"        // an open connection ended
	EventConnected  EventKind = "connected"   // the first connection was confirmed
	EventRestored   EventKind = "restored"    // a connection was confirmed after a loss
	EventGaveUp     EventKind = "gave_up"     // the Client stopped for good
)

// Event is one entry of a Client's recent history.
type Event struct {
	At   time.Time
	Kind EventKind
	// Reason is the Observer's label: a dial result for EventDialFailed
	// ("refused", "http_503", …), a loss reason for EventLost ("close",
	// "heartbeat", …); for EventGaveUp either.
	Reason      string
	CloseCode   int    // Reason "close": the upstream's close code
	CloseReason string // Reason "close": the upstream's close reason
	HTTPStatus  int    // a dial answered with an HTTP status other than 101
	// Attempt is the failure's number in its streak; for EventRestored and
	// EventConnected, the attempts the streak took.
	Attempt int
	// Delay is the backoff chosen after a failure.
	Delay time.Duration
	// Downtime is, for EventRestored, the time from the loss of the
	// previous confirmed connection to this confirmation.
	Downtime time.Duration
}

// statusBoard is what Client.Status reports. The Client's goroutine writes
// it (noteState, noteEnd); any goroutine reads it. Its lock, which also
// guards Client.done, is never held while calling out.
type statusBoard struct {
	mu sync.Mutex
	// s is the Status but for its failures and Recent, which are held
	// apart: with them, a Status is 344 bytes, most of them events.
	s statusNow
	// failed holds LastFailure and LastClose from the first failure on: a
	// session that stays connected has none, and the two held inline were
	// 224 bytes of every idle session.
	failed *lastFailures
	// events is a ring of the latest events, allocated as they come: a
	// session that stays connected records one, and RecentEvents of them
	// held inline were a KiB of every idle session.
	events    []Event
	n         int // events recorded; the latest is events[(n-1)%RecentEvents]
	confirmed bool
}

// statusNow is Status's fields of the same names.
type statusNow struct {
	State      State
	Gen        uint64
	Attempt    int
	NextRetry  time.Time
	DownSince  time.Time
	Reconnects int
	GaveUp     string
}

// lastFailures is Status's LastFailure and LastClose.
type lastFailures struct{ failure, close Event }

// Status returns a copy of the connection's state. Safe for concurrent use.
func (c *Client) Status() Status {
	b := &c.status
	b.mu.Lock()
	defer b.mu.Unlock()
	n := &b.s
	s := Status{State: n.State, Gen: n.Gen, Attempt: n.Attempt, NextRetry: n.NextRetry,
		DownSince: n.DownSince, Reconnects: n.Reconnects, GaveUp: n.GaveUp}
	if f := b.failed; f != nil {
		s.LastFailure, s.LastClose = f.failure, f.close
	}
	first := max(0, b.n-RecentEvents)
	s.Recent = make([]Event, 0, b.n-first)
	for i := first; i < b.n; i++ {
		s.Recent = append(s.Recent, b.events[i%RecentEvents])
	}
	return s
}

func (b *statusBoard) record(e Event) {
	if len(b.events) < RecentEvents {
		if len(b.events) == cap(b.events) {
			grown := make([]Event, len(b.events), min(max(2*len(b.events), 1), RecentEvents))
			copy(grown, b.events)
			b.events = grown
		}
		b.events = append(b.events, e) // at index n: the ring is not full
	} else {
		b.events[b.n%RecentEvents] = e
	}
	b.n++
}

func (b *statusBoard) latest() *Event {
	if b.n == 0 {
		return nil
	}
	return &b.events[(b.n-1)%RecentEvents]
}

// noteState records a state change. setState calls it from the Client's
// goroutine, so it may read what that goroutine owns: the generation, the
// failure count and the delay wait just chose, and c.err before StateClosed.
func (c *Client) noteState(s State) {
	now := c.opts.now()
	b := &c.status
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.s.State
	b.s.State, b.s.Gen, b.s.Attempt = s, c.gen, c.failures
	b.s.NextRetry = time.Time{}
	switch s {
	case StateConnecting:
		if b.s.DownSince.IsZero() && !b.confirmed {
			b.s.DownSince = now // the Client's start
		}
	case StateLost:
		if prev == StateConfirmed {
			b.s.DownSince = now
		}
	case StateWaiting:
		b.s.NextRetry = now.Add(c.lastDelay)
		if e := b.latest(); e != nil && (e.Kind == EventDialFailed || e.Kind == EventLost) {
			e.Attempt, e.Delay = c.failures, c.lastDelay
			b.noteFailureLocked(*e)
		}
	case StateConfirmed:
		b.confirmedLocked(now, c.failures)
	case StateClosed:
		if c.err != nil && b.failed != nil {
			b.gaveUpLocked(now)
		}
	}
}

func (b *statusBoard) confirmedLocked(now time.Time, attempts int) {
	e := Event{At: now, Kind: EventConnected, Attempt: attempts}
	if b.confirmed {
		e.Kind, e.Downtime = EventRestored, now.Sub(b.s.DownSince)
		b.s.Reconnects++
	}
	b.record(e)
	b.confirmed = true
	b.s.Attempt = 0
	b.s.DownSince = time.Time{}
}

// gaveUpLocked records the stop, named after the failure noteEnd recorded
// last: the Client stops right after one (a permanent close code or status,
// TETHER_MAX_ATTEMPTS reached), and the error it stops with may no longer
// carry the details (ErrAuthFailed).
func (b *statusBoard) gaveUpLocked(now time.Time) {
	e := b.failed.failure
	e.At, e.Kind, e.Delay = now, EventGaveUp, 0
	b.s.GaveUp = e.Reason
	b.record(e)
}

// noteEnd records why a dial or a connection ended, before the policy
// decides what follows. run calls it from the Client's goroutine, for
// failures only (not for the Client's own shutdown).
func (c *Client) noteEnd(err error) {
	now := c.opts.now()
	b := &c.status
	b.mu.Lock()
	defer b.mu.Unlock()
	kind := EventDialFailed
	if b.s.State == StateLost { // serve ended: the connection had opened
		kind = EventLost
	}
	e := failureEvent(now, kind, err)
	e.Attempt = c.failures + 1 // wait counts it; noteState(StateWaiting) confirms
	b.noteFailureLocked(e)
	b.record(e)
}

// noteFailureLocked makes e the last failure, and the last close when it
// is one.
func (b *statusBoard) noteFailureLocked(e Event) {
	if b.failed == nil {
		b.failed = &lastFailures{}
	}
	b.failed.failure = e
	if e.Reason == labels.LossClose {
		b.failed.close = e
	}
}

// failureEvent names err with the Observer's labels: a loss reason for a
// connection that had opened, a dial result for a dial.
func failureEvent(now time.Time, kind EventKind, err error) Event {
	e := Event{At: now, Kind: kind}
	if kind == EventLost {
		e.Reason, e.CloseCode = lossReason(err)
	} else {
		e.Reason = dialResult(err)
	}
	var ce *CloseError
	var se *StatusError
	switch {
	case errors.As(err, &ce):
		e.Reason, e.CloseCode, e.CloseReason = labels.LossClose, ce.Code, ce.Reason
	case errors.As(err, &se):
		e.HTTPStatus = se.Status
	}
	return e
}
