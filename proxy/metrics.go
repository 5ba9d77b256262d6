package proxy

import (
	"errors"
	"net"

	"github.com/gobwas/ws"
)

// Metrics receives the proxy's countable events. cmd/tether implements it with
// Prometheus collectors; the proxy itself depends on no metrics library.
// Methods are called from session goroutines, never under a lock, and must
// not block. String arguments are label values from the fixed sets below.
type Metrics interface {
	// SessionStarted and SessionEnded bracket each admitted app connection
	// (counted against MaxSessions from admission, handshake included), by
	// the kind of listener it came in on (ListenerWS, ListenerUnix,
	// ListenerTCP, ListenerSSE, as a string). An sse:// session lingers
	// after its app's request ends (Options.SSELinger) and ends after that.
	SessionStarted(listener string)
	SessionEnded(listener string)
	// Message counts one message received from the app
	// (DirectionAppToUpstream) or delivered to it (DirectionUpstreamToApp),
	// by listener kind. A message a tcp:// policy drops is not delivered:
	// it is counted by AppDropped instead.
	Message(direction, listener string)
	// AppDropped counts one message tether did not forward because of a
	// transport rule, with one of the Drop* reasons.
	AppDropped(reason string)
	// DroppedFromOutbox counts app messages lost to a full outbox, under
	// every TETHER_OUTBOX_OVERFLOW policy (under close, the refused message).
	DroppedFromOutbox(n int)
	// HandshakeRejected counts an app handshake that did not complete, with
	// one of the Reject* reasons. A tcp:// app has no handshake: its
	// refusals at admission and first dial are counted here too, as are an
	// sse:// listener's refused requests.
	HandshakeRejected(reason string)
	// DrainStarted marks the start of Shutdown.
	DrainStarted()
	// Replayed counts app messages re-sent upstream on a reconnect.
	Replayed(n int)
	// DuplicateDropped counts an upstream message dropped as a duplicate.
	DuplicateDropped()
	// Gap counts a sequence gap by outcome (filled, resync, closed, skipped,
	// notified).
	Gap(outcome string)
	// Recovered counts a stream made whole after a reconnect, by method
	// (resume, http, resync).
	Recovered(method string)
	// HeldBytesChanged adds delta to the bytes held behind sequence gaps.
	HeldBytesChanged(delta int)
}

// Message directions (Metrics.Message).
const (
	DirectionAppToUpstream = "app_to_upstream"
	DirectionUpstreamToApp = "upstream_to_app"
)

// Why a message was not forwarded (Metrics.AppDropped). The first three
// are messages from the app, which is closed (or was gone); the next two
// are upstream messages a tcp:// app did not get under TETHER_TCP_BINARY or
// TETHER_TCP_NEWLINE set to drop or close; the last, app messages an SSE
// upstream cannot take (the app stays open).
const (
	DropTooLarge     = "too_large"    // over TETHER_MAX_MESSAGE_BYTES: WebSocket message (1009) or tcp:// line
	DropInvalidUTF8  = "invalid_utf8" // text that is not UTF-8: WebSocket text message (1007) or tcp:// line
	DropUnterminated = "unterminated" // bytes a tcp:// app sent after its last newline before disconnecting
	DropBinary       = "binary"       // a binary upstream message, for a tcp:// app
	DropNewline      = "newline"      // an upstream text message holding CR or LF, for a tcp:// app
	DropReadOnly     = "read_only"    // an app message (WebSocket or tcp://) while the upstream is SSE, which takes none
)

// Gap outcomes (Metrics.Gap), DESIGN.md "Sequences and gap filling": filled
// (by the live stream, a resumed replay or TETHER_GAPFILL_URL), resync (a
// snapshot reset the stream), or what TETHER_GAP_POLICY did with a gap not
// filled in time: closed, skipped, notified.
const (
	GapFilled   = "filled"
	GapResync   = "resync"
	GapClosed   = "closed"
	GapSkipped  = "skipped"
	GapNotified = "notified"
)

// Recovery methods (Metrics.Recovered): how a stream was made whole after a
// reconnect or a gap.
const (
	RecoveryResume = "resume" // the server replayed after the last number, asked by TETHER_RESUME_MESSAGE
	RecoveryHTTP   = "http"   // TETHER_GAPFILL_URL filled the gap
	RecoveryResync = "resync" // the server sent a snapshot instead
)

// Why an app handshake did not complete (Metrics.HandshakeRejected).
const (
	RejectMaxSessions       = "max_sessions"       // TETHER_MAX_SESSIONS reached: 503
	RejectDraining          = "draining"           // shutting down: 503
	RejectUpstreamPermanent = "upstream_permanent" // the first dial failed for good: 502
	RejectBadRequest        = "bad_request"        // not a valid WebSocket upgrade: 4xx; on an sse:// listener, not a GET: 405
	RejectTimeout           = "timeout"            // handshake request not read within HandshakeTimeout
	RejectAborted           = "aborted"            // the app's connection failed mid-handshake
	RejectOrigin            = "origin"             // Origin not in TETHER_ALLOWED_ORIGINS: 403
	RejectHost              = "host"               // Host not loopback or the listen host (DNS rebinding): 403
	RejectHeadersTooLarge   = "headers_too_large"  // handshake request over 16 KiB: 431
	RejectPath              = "path"               // request path cannot be joined onto the upstream URL (TETHER_FORWARD_PATH): 400; not an sse:// listener's path: 404
)

// nopMetrics counts nothing: the Metrics of a Server whose Options have none.
type nopMetrics struct{}

func (nopMetrics) SessionStarted(string)    {}
func (nopMetrics) SessionEnded(string)      {}
func (nopMetrics) Message(string, string)   {}
func (nopMetrics) AppDropped(string)        {}
func (nopMetrics) DroppedFromOutbox(int)    {}
func (nopMetrics) HandshakeRejected(string) {}
func (nopMetrics) DrainStarted()            {}
func (nopMetrics) Replayed(int)             {}
func (nopMetrics) DuplicateDropped()        {}
func (nopMetrics) Gap(string)               {}
func (nopMetrics) Recovered(string)         {}
func (nopMetrics) HeldBytesChanged(int)     {}

// handshakeFailure names a handshake that failed without tether deciding to
// refuse it: gobwas refused a malformed request, or the socket failed.
func handshakeFailure(err error) string {
	var rejected *ws.ConnectionRejectedError
	var ne net.Error
	switch {
	case errors.As(err, &rejected):
		return RejectBadRequest
	case errors.As(err, &ne) && ne.Timeout():
		return RejectTimeout
	}
	return RejectAborted
}

// OutboxMessages counts the app messages queued across sessions right now.
// It is read at each metrics scrape rather than tracked by increments, so the
// gauge cannot drift from the outboxes whatever code path changes them.
func (s *Server) OutboxMessages() int {
	n := 0
	for _, sess := range s.snapshot() {
		sess.mu.Lock()
		n += sess.outbox.Len()
		sess.mu.Unlock()
	}
	return n
}

// snapshot copies the live sessions, so they can be visited without s.mu.
func (s *Server) snapshot() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sessions := make([]*Session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	return sessions
}
