// Package upstream owns tether's connection to the upstream server: it dials
// (TLS, static headers, a bearer token re-read from its file on every dial),
// waits between attempts with jittered backoff, detects dead connections with a
// heartbeat, and decides from close codes and HTTP statuses whether to reconnect,
// re-authenticate or give up.
//
// The upstream is a WebSocket server (KindWebSocket) or a Server-Sent Events
// endpoint (KindSSE). Both run on the same state machine through a small
// transport interface. An SSE connection is an HTTP GET whose
// text/event-stream body internal/sse parses; each event becomes one text
// message (SSEFormat), comments and id-only blocks only prove the stream
// alive, Send answers ErrReadOnly. What the standard lets a server steer is
// kept on tether's terms: the stream's last event ID is sent as Last-Event-ID
// on the next request, a "retry" value is a floor under the jittered backoff
// rather than the delay, a 204 stops the Client, and silence for PingInterval
// + PingTimeout is death, since SSE has no ping.
//
// Every request, the readiness probe's included, goes directly or through
// the HTTP proxy that Options.Proxy chooses (proxydial.go): a CONNECT
// tunnel for a WebSocket upstream (internal/proxydial), ws:// included,
// since a proxy would not pass an Upgrade on; net/http's proxying for SSE.
// Proxy credentials are the proxy URL's userinfo, sent as
// Proxy-Authorization: Basic and never quoted. A refusal of them (407)
// follows the credentials policy, like a 401; a proxy that is down or
// refuses the tunnel is a transient failure (a *proxydial.Error).
//
// One Client serves one proxy session. One goroutine at a time drives its
// state machine, the only one that dials and changes state; each
// connection it opens gets a rising generation number, a reader goroutine
// and a restore goroutine, which only report to it. While a connection is
// open and nothing happens, no goroutine of the state machine's is left:
// what it waits for (the reader's and the restore's reports, the heartbeat
// and confirmation timers, a resume from sleep, the Client's end) are
// callbacks that start one when it has none (serve.go), so an idle
// connection costs its reader alone.
// Events of a superseded connection are never seen by the state machine: each
// connection reports to its own watch, which takes reports only while it is
// the live one.
//
// The package knows nothing about JSON rules. Its owner plugs in through Handler
// (what to send on each new connection before it counts as restored, where
// messages go, and Flush: when the reader is about to wait, so what the owner
// held back of a burst goes on) and through the Confirm and HeartbeatReply
// predicates, which its protocol supplies. An
// optional Observer hears of every dial, loss and confirmation, with bounded
// label values, so the owner can count them without this package knowing any
// metrics library. Status reports the same, per Client, for the status page:
// state, attempt, next retry, downtime, the last close and failure, and the
// latest events (status.go, written by the Client's goroutine under a lock
// of its own). Probe dials once, for readiness checks.
//
// The policy parts (Backoff, ClosePolicy, ClassifyStatus, CodeSet,
// ParseRetryAfter) are pure functions with injected randomness and time.
package upstream
