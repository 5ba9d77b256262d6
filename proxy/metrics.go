package proxy

import (
	"errors"
	"net"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
)

// Metrics receives the proxy's countable events. cmd/tether implements it with
// Prometheus collectors; the proxy itself depends on no metrics library.
// Methods are called from session goroutines, never under a lock, and must
// not block. String arguments are label values of internal/labels, the
// one definition internal/metrics pre-creates its series from.
type Metrics interface {
	// SessionStarted and SessionEnded bracket each admitted app connection
	// (counted against MaxSessions from admission, handshake included), by
	// the kind of listener it came in on (ListenerWS, ListenerUnix,
	// ListenerTCP, ListenerSSE, as a string). An sse:// session lingers
	// after its app's request ends (Options.SSELinger) and ends after that.
	SessionStarted(listener string)
	SessionEnded(listener string)
	// Forwarded counts n messages received from the app
	// (labels.DirectionAppToUpstream) or delivered to it
	// (labels.DirectionUpstreamToApp), by listener kind: the messages
	// towards the app once per batch queued on its socket, since the
	// counter is every session's and an update per message was a
	// contended atomic add per message. A message a tcp:// policy drops is
	// not delivered: it is counted by AppDropped instead.
	Forwarded(direction, listener string, n int)
	// AppDropped counts one message tether did not forward because of a
	// transport rule, with one of the labels.Drop* reasons.
	AppDropped(reason string)
	// DroppedFromOutbox counts app messages lost to a full outbox, under
	// every TETHER_OUTBOX_OVERFLOW policy (under close, the refused message).
	DroppedFromOutbox(n int)
	// HandshakeRejected counts an app handshake that did not complete, with
	// one of the labels.Reject* reasons. A tcp:// app has no handshake: its
	// refusals at admission and first dial are counted here too, as are an
	// sse:// listener's refused requests.
	HandshakeRejected(reason string)
	// SSEResumed counts what an sse:// request's Last-Event-ID led to, with
	// one of the labels.SSE* outcomes; a request without one is not counted.
	SSEResumed(outcome string)
	// DrainStarted marks the start of Shutdown.
	DrainStarted()
	// Replayed counts app messages re-sent upstream on a reconnect.
	Replayed(n int)
	// DuplicateDropped counts an upstream message dropped as a duplicate.
	DuplicateDropped()
	// Gap counts a sequence gap by outcome (filled, resync, closed, skipped,
	// notified; epoch and restart, a stream whose numbering started over).
	Gap(outcome string)
	// Recovered counts a stream made whole after a reconnect, by method
	// (resume, http, resync).
	Recovered(method string)
	// HeldBytesChanged adds delta to the bytes held behind sequence gaps.
	HeldBytesChanged(delta int)
}

// nopMetrics counts nothing: the Metrics of a Server whose Options have none.
type nopMetrics struct{}

func (nopMetrics) SessionStarted(string)         {}
func (nopMetrics) SessionEnded(string)           {}
func (nopMetrics) Forwarded(string, string, int) {}
func (nopMetrics) AppDropped(string)             {}
func (nopMetrics) DroppedFromOutbox(int)         {}
func (nopMetrics) HandshakeRejected(string)      {}
func (nopMetrics) SSEResumed(string)             {}
func (nopMetrics) DrainStarted()                 {}
func (nopMetrics) Replayed(int)                  {}
func (nopMetrics) DuplicateDropped()             {}
func (nopMetrics) Gap(string)                    {}
func (nopMetrics) Recovered(string)              {}
func (nopMetrics) HeldBytesChanged(int)          {}

// handshakeFailure names a handshake that failed without tether deciding to
// refuse it: gobwas refused a malformed request, or the socket failed.
func handshakeFailure(err error) string {
	var rejected *ws.ConnectionRejectedError
	var ne net.Error
	switch {
	case errors.As(err, &rejected):
		return labels.RejectBadRequest
	case errors.As(err, &ne) && ne.Timeout():
		return labels.RejectTimeout
	}
	return labels.RejectAborted
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
