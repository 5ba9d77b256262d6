package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Sentinel errors. Callers check them with errors.Is; the client wraps them
// with the detail that caused them (the status, the attempt count).
var (
	// ErrAuthFailed: the upstream kept refusing our credentials (HTTP 401/403)
	// past the configured number of consecutive auth failures.
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

// Is makes errors.Is(err, ErrPermanent) true: retrying cannot help.
func (e *streamRefusal) Is(target error) bool { return target == ErrPermanent }
