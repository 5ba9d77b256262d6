package metrics

import "strconv"

// Label values. Each set is bounded; values are pre-created at zero in New so
// that rate() and increase() see a series before its first event.
var (
	// dialResults are the outcomes of an upstream dial (upstream.Observer).
	dialResults = []string{
		"ok", "refused", "timeout", "dns", "tls", "network",
		"http_401", "http_403", "http_429", "http_5xx", "http_4xx", "http_other",
		"bad_url", "token",
	}
	// lossReasons are why an open upstream connection ended
	// (upstream.Observer); "close" comes with a close code label.
	lossReasons = []string{"close", "reset", "eof", "heartbeat", "protocol", "restore", "network"}
	// rejectionReasons are why an app's WebSocket handshake was refused, or
	// a tcp:// app on accept (max_sessions, draining, upstream_permanent).
	rejectionReasons = []string{
		"max_sessions", "draining", "upstream_permanent", "bad_request", "timeout", "aborted",
		"origin", "host", "headers_too_large", "path",
	}
)

// Message directions (tether_messages_total{direction}).
const (
	DirectionAppToUpstream = "app_to_upstream"
	DirectionUpstreamToApp = "upstream_to_app"
)

// Listener kinds (the listener label of tether_sessions and
// tether_messages_total): WebSocket over TCP, WebSocket over a unix socket,
// newline-delimited lines over TCP, Server-Sent Events over HTTP.
const (
	ListenerWS   = "ws"
	ListenerUnix = "unix"
	ListenerTCP  = "tcp"
	ListenerSSE  = "sse"
)

// Why a message was not forwarded (tether_app_dropped_total{reason}): from
// the app, over TETHER_MAX_MESSAGE_BYTES, text that is not UTF-8, or the
// bytes after a tcp:// app's last newline when it disconnected; to a tcp://
// app, a binary message or text with a line break under a drop or close
// policy (TETHER_TCP_BINARY, TETHER_TCP_NEWLINE); an app message while the
// upstream is SSE, which takes none (read_only).
const (
	DropTooLarge     = "too_large"
	DropInvalidUTF8  = "invalid_utf8"
	DropUnterminated = "unterminated"
	DropBinary       = "binary"
	DropNewline      = "newline"
	DropReadOnly     = "read_only"
)

// Gap outcomes (tether_gaps_total{outcome}), DESIGN.md "Sequences and gap
// filling": filled (by a resumed replay or TETHER_GAPFILL_URL), resync (a
// snapshot reset the stream), and after TETHER_GAP_TIMEOUT the policy taken:
// closed, skipped or notified.
const (
	GapFilled   = "filled"
	GapResync   = "resync"
	GapClosed   = "closed"
	GapSkipped  = "skipped"
	GapNotified = "notified"
)

// Recovery methods (tether_recoveries_total{method}): how the app's stream was
// made whole after a reconnect: the server resumed after the last sequence
// number, TETHER_GAPFILL_URL filled the gap over HTTP, or the server sent a
// snapshot (resync).
const (
	RecoveryResume = "resume"
	RecoveryHTTP   = "http"
	RecoveryResync = "resync"
)

var (
	gapOutcomes     = []string{GapFilled, GapResync, GapClosed, GapSkipped, GapNotified}
	recoveryMethods = []string{RecoveryResume, RecoveryHTTP, RecoveryResync}
	directions      = [...]string{DirectionAppToUpstream, DirectionUpstreamToApp}
	listenerKinds   = [...]string{ListenerWS, ListenerUnix, ListenerTCP, ListenerSSE}
	dropReasons     = []string{DropTooLarge, DropInvalidUTF8, DropUnterminated, DropBinary, DropNewline, DropReadOnly}
)

// codeNone is the code label of a disconnect without a close frame.
const codeNone = "none"

// CloseCodeLabel folds a WebSocket close code into a bounded label value:
//
//   - 1000-1015, the codes RFC 6455 and the IANA registry define: the number
//     ("1000", "1012"), because each means something different to an operator;
//   - 3000-4999, registered and private application codes: "permanent" when
//     permanent(code) (TETHER_PERMANENT_CODES), "reauth" when reauth(code)
//     (TETHER_REAUTH_CODES), otherwise "3xxx" or "4xxx";
//   - 0 (no close frame): "none";
//   - anything else: "other".
//
// At most 16 + 5 + 1 values, whatever the upstream sends. nil predicates
// match nothing.
func CloseCodeLabel(code int, permanent, reauth func(int) bool) string {
	switch {
	case code == 0:
		return codeNone
	case code >= 1000 && code <= 1015:
		return strconv.Itoa(code)
	case code >= 3000 && code <= 4999:
		return applicationCodeLabel(code, permanent, reauth)
	}
	return "other"
}

func applicationCodeLabel(code int, permanent, reauth func(int) bool) string {
	switch {
	case permanent != nil && permanent(code):
		return "permanent"
	case reauth != nil && reauth(code):
		return "reauth"
	case code < 4000:
		return "3xxx"
	}
	return "4xxx"
}
