package labels

// Message directions (tether_messages_total{direction}).
const (
	DirectionAppToUpstream = "app_to_upstream"
	DirectionUpstreamToApp = "upstream_to_app"
)

// Listener kinds (the listener label of tether_sessions and
// tether_messages_total), TETHER_LISTEN's schemes: WebSocket over TCP,
// WebSocket over a unix socket, newline-delimited lines over TCP,
// Server-Sent Events over HTTP.
const (
	ListenerWS   = "ws"
	ListenerUnix = "unix"
	ListenerTCP  = "tcp"
	ListenerSSE  = "sse"
)

// Why a message was not forwarded (tether_app_dropped_total{reason}). The
// first three are messages from the app, which is closed (or was gone); the
// next two are upstream messages a tcp:// app did not get under
// TETHER_TCP_BINARY or TETHER_TCP_NEWLINE set to drop or close; then app
// messages an SSE upstream cannot take (the app stays open); then messages
// of either direction that the protocol could not frame; an app
// unsubscribe for what is no longer active (the app stays open); last, app
// messages still queued when the app left.
const (
	DropTooLarge     = "too_large"    // over TETHER_MAX_MESSAGE_BYTES: WebSocket message (1009) or tcp:// line
	DropInvalidUTF8  = "invalid_utf8" // text that is not UTF-8: WebSocket text message (1007) or tcp:// line
	DropUnterminated = "unterminated" // bytes a tcp:// app sent after its last newline before disconnecting
	DropBinary       = "binary"       // a binary upstream message, for a tcp:// app
	DropNewline      = "newline"      // an upstream text message holding CR or LF, for a tcp:// app
	DropReadOnly     = "read_only"    // an app message (WebSocket or tcp://) while the upstream is SSE, which takes none
	DropUnframed     = "unframed"     // a message (from the app, which is closed, or the upstream) its protocol could not frame
	DropEnded        = "ended"        // an app unsubscribe for a subscription the server ended or tether abandoned (graphql-ws complete)
	DropUnsent       = "unsent"       // an app message still in the outbox when the app left before an upstream connection took it
	DropStale        = "stale"        // an app message settling an upstream message of a lost connection (a STOMP ACK or NACK)
	DropKeepalive    = "keepalive"    // an app keepalive no upstream asked for: tether's own beat's answer, or a lost connection's (Centrifugo pong)
)

// Why an app handshake did not complete
// (tether_handshake_rejections_total{reason}). A tcp:// app has no
// handshake: its refusals at admission and first dial count here too, as
// do an sse:// listener's refused requests.
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

// Gap outcomes (tether_gaps_total{outcome}), docs/design.md "Sequences and
// gap filling": filled (by the live stream, a resumed replay or
// TETHER_GAPFILL_URL), resync (a snapshot reset the stream), or what
// TETHER_GAP_POLICY did with a gap not filled in time: closed, skipped,
// notified. epoch and restart count the streams whose numbering started
// over, which TETHER_GAP_POLICY is given too: a new TETHER_EPOCH_PATH
// value, or numbers that went back on a new upstream connection.
const (
	GapFilled   = "filled"
	GapResync   = "resync"
	GapClosed   = "closed"
	GapSkipped  = "skipped"
	GapNotified = "notified"
	GapEpoch    = "epoch"
	GapRestart  = "restart"
	// GapResyncFailed counts the snapshots of TETHER_RESYNC_URL that
	// failed or did not come in time; the gap goes to TETHER_GAP_POLICY.
	GapResyncFailed = "resync_failed"
)

// Recovery methods (tether_recoveries_total{method}): how a stream was made
// whole after a reconnect or a gap.
const (
	RecoveryResume = "resume" // the server replayed after the last number, asked by TETHER_RESUME_MESSAGE
	RecoveryHTTP   = "http"   // TETHER_GAPFILL_URL filled the gap
	RecoveryResync = "resync" // the server sent a snapshot instead
)

// Upstream dial results (tether_upstream_dials_total{result}), as
// upstream.Observer reports them: the dial succeeded, or why it failed.
// The HTTP statuses an operator acts on (credentials, rate limiting) have
// their own value; the others are folded into classes, so the label stays
// bounded.
const (
	DialOK          = "ok"
	DialRefused     = "refused"     // connection refused
	DialTimeout     = "timeout"     // connect, TLS or handshake took longer than DialTimeout
	DialDNS         = "dns"         // name resolution failed
	DialTLS         = "tls"         // TLS handshake or certificate verification failed
	DialNetwork     = "network"     // any other socket error, a reset during the handshake included
	DialHTTP401     = "http_401"    // the handshake was answered 401
	DialHTTP403     = "http_403"    // … 403
	DialHTTP429     = "http_429"    // … 429
	DialHTTP5xx     = "http_5xx"    // … any 5xx
	DialHTTP4xx     = "http_4xx"    // … any other 4xx
	DialHTTPOther   = "http_other"  // … 1xx-3xx other than 101 (for SSE, other than 200), or a 204 stream
	DialBadURL      = "bad_url"     // the upstream URL cannot be dialled
	DialToken       = "token"       // the token file could not be read
	DialSubprotocol = "subprotocol" // the upstream chose another subprotocol than the app's
	DialHandshake   = "handshake"   // an answer that is no WebSocket handshake
	DialProxy       = "proxy"       // the HTTP proxy could not be reached or refused the tunnel
	DialProxyAuth   = "proxy_auth"  // the HTTP proxy refused its credentials
)

// Why an open upstream connection ended
// (tether_upstream_disconnects_total{reason}), as upstream.Observer reports
// it; only close comes with a close code.
const (
	LossClose     = "close"     // the upstream sent a close frame
	LossReset     = "reset"     // TCP reset
	LossEOF       = "eof"       // TCP end without a close frame
	LossHeartbeat = "heartbeat" // nothing within PingInterval+PingTimeout
	LossProtocol  = "protocol"  // the upstream broke RFC 6455, or sent a message over MaxMessageBytes
	LossRestore   = "restore"   // restoring the app on the new connection failed
	LossNetwork   = "network"   // any other socket error
)

// What an sse:// request's Last-Event-ID led to
// (tether_sse_resumes_total{outcome}); a request without one is not
// counted. The three that start the stream with a tether-gap event have
// its reason as their value.
const (
	SSEResumed     = "resumed"      // a lingering session resumed after the id: nothing lost, nothing twice
	SSEEvicted     = "evicted"      // a lingering session resumed, but the events right after the id had left its buffer
	SSESessionGone = "session_gone" // an id tether wrote (<token>-<n>, or <stream>:<seq> with sequencing) whose session is gone: a new session, live only
	SSEForeignID   = "foreign_id"   // an id tether cannot read, with a WebSocket upstream: a new session, live only
	SSEUpstream    = "upstream"     // an id no session holds, passed to the SSE upstream as its Last-Event-ID
)
