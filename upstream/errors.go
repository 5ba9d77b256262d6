package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tetherproxy/tether/internal/proxydial"
)

// Sentinel errors. Callers check them with errors.Is; the client wraps them
// with the detail that caused them (the status, the attempt count).
var (
	// ErrAuthFailed: the upstream kept refusing our credentials (HTTP 401/403),
	// or the HTTP proxy its own (407), past the configured number of
	// consecutive auth failures.
	ErrAuthFailed = errors.New("upstream rejected credentials")
	// ErrGaveUp: the configured maximum number of attempts was reached.
	ErrGaveUp = errors.New("gave up reconnecting")
	// ErrClosed: the owner called Close; not a failure of the upstream.
	ErrClosed = errors.New("upstream client closed")
	// ErrHeartbeatTimeout: no inbound frame arrived within ping interval +
	// ping timeout, so the connection is presumed dead (half-open TCP).
	ErrHeartbeatTimeout = errors.New("no frame within heartbeat timeout")
	// ErrPermanent: the upstream said something retrying cannot fix (a
	// permanent close code or HTTP status, a TLS verification failure, an
	// SSE upstream's 204 or a response that is not an event stream).
	ErrPermanent = errors.New("permanent upstream failure")
	// ErrReadOnly: Send on a connection to an SSE upstream, which has no way
	// to receive messages.
	ErrReadOnly = errors.New("upstream: an SSE upstream takes no messages")
)

// CloseError is a close frame received from the upstream. Code 1006 (abnormal
// closure) is never on the wire (RFC 6455 §7.4.1); the client uses it for a
// connection that ended without a close frame.
type CloseError struct {
	Code   int
	Reason string
}

// Error reads like `upstream closed with 1008 "policy violation"`. The reason
// is quoted because it comes from the server and may hold anything.
func (e *CloseError) Error() string {
	if e.Reason == "" {
		return "upstream closed with " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("upstream closed with %d %q", e.Code, e.Reason)
}

// StatusError is an upstream answer to the WebSocket handshake with an HTTP
// status other than 101 Switching Protocols.
type StatusError struct {
	Status int
	// RetryAfter is the parsed Retry-After header, zero when absent.
	RetryAfter time.Duration
	// Reason is the status text or the first line of the body, when cheap to
	// get; it is informational only.
	Reason string
}

// Error reads like `upstream answered HTTP 503 "Service Unavailable" (retry
// after 30s)`, each part present only when known.
func (e *StatusError) Error() string {
	msg := "upstream answered HTTP " + strconv.Itoa(e.Status)
	if e.Reason != "" {
		msg += fmt.Sprintf(" %q", e.Reason)
	}
	if e.RetryAfter > 0 {
		msg += " (retry after " + e.RetryAfter.String() + ")"
	}
	return msg
}

// streamRefusal is an SSE upstream's answer that is neither an event stream
// nor an HTTP error: 204 No Content, which the standard defines as "stop
// reconnecting", or a 200 whose body is something else than an event
// stream (EventSource fails for good on both). Both are permanent.
type streamRefusal struct {
	status      int
	contentType string // of a 200
}

// Error reads `upstream asked to stop (HTTP 204)` or `upstream answered HTTP
// 200 with Content-Type "text/html", not text/event-stream`.
func (e *streamRefusal) Error() string {
	if e.status == http.StatusNoContent {
		return "upstream asked to stop (HTTP 204)"
	}
	if e.contentType == "" {
		return fmt.Sprintf("upstream answered HTTP %d without a Content-Type, not text/event-stream", e.status)
	}
	return fmt.Sprintf("upstream answered HTTP %d with Content-Type %q, not text/event-stream", e.status, e.contentType)
}

// proxyAuthFailed ends a Client whose HTTP proxy refused its credentials
// AuthFailuresMax times in a row. It reads like the proxy's refusal, and is
// both ErrAuthFailed and the *proxydial.Error.
type proxyAuthFailed struct{ err *proxydial.Error }

func (e *proxyAuthFailed) Error() string   { return e.err.Error() }
func (e *proxyAuthFailed) Unwrap() []error { return []error{ErrAuthFailed, e.err} }

// Is makes errors.Is(err, ErrPermanent) true: retrying cannot help.
func (e *streamRefusal) Is(target error) bool { return target == ErrPermanent }

// SubprotocolError is an upstream connection that does not speak the
// subprotocol the app was accepted with (Client.PinProtocol, or the first
// connection's). The app cannot change its subprotocol on an open socket,
// and relaying between two protocols would garble both, so the connection
// is not used. When the dial offered only Want, the upstream does not speak
// it (any more) and retrying cannot change that: Permanent, and errors.Is
// reports ErrPermanent. Otherwise the dial was under way when the app was
// given Want, and the next one offers only Want.
//
// With Unoffered, the upstream chose a subprotocol the dial did not offer
// (Offered), which RFC 6455 §4.1 fails: a server that answers so answers
// every dial so, which is permanent too. The dialer does not say which it
// chose.
type SubprotocolError struct {
	Want, Got string
	Permanent bool

	Unoffered bool
	Offered   []string
}

// Error reads `upstream accepted without subprotocol "b", the one the app
// was accepted with`, `upstream chose subprotocol "a", the app was
// accepted with "b"` or `upstream chose a subprotocol that was not offered
// (offered ["a"])`.
func (e *SubprotocolError) Error() string {
	switch {
	case e.Unoffered && len(e.Offered) == 0:
		return "upstream chose a subprotocol, none was offered"
	case e.Unoffered:
		return fmt.Sprintf("upstream chose a subprotocol that was not offered (offered %q)", e.Offered)
	case e.Got == "":
		return fmt.Sprintf("upstream accepted without subprotocol %q, the one the app was accepted with", e.Want)
	case e.Want == "":
		return fmt.Sprintf("upstream chose subprotocol %q, the app was accepted without one", e.Got)
	}
	return fmt.Sprintf("upstream chose subprotocol %q, the app was accepted with %q", e.Got, e.Want)
}

// Is makes errors.Is(err, ErrPermanent) true for a permanent refusal.
func (e *SubprotocolError) Is(target error) bool { return e.Permanent && target == ErrPermanent }

// BrokenCloseError is an upstream close frame that breaks RFC 6455: a reason
// that is not UTF-8 (§5.5.1), a code no endpoint may send (§7.4), a 1-byte
// payload. A server that writes its close frames that way writes every one
// of them so, and its code cannot be trusted to mean what it says:
// reconnecting would only repeat it, so it is permanent (errors.Is reports
// ErrPermanent), whatever the code.
type BrokenCloseError struct {
	Code    int    // the code the frame carried, 0 when it had none
	Problem string // what is wrong with it
}

// Error reads `upstream broke the WebSocket protocol: close reason is not
// UTF-8 (close code 1003)`.
func (e *BrokenCloseError) Error() string {
	msg := "upstream broke the WebSocket protocol: " + e.Problem
	if e.Code != 0 {
		msg += " (close code " + strconv.Itoa(e.Code) + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrPermanent) true.
func (e *BrokenCloseError) Is(target error) bool { return target == ErrPermanent }
