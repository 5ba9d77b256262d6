// Package proxy owns tether's local side: the listeners, the WebSocket upgrade
// of each app connection, and one Session per app connection.
//
// A Server serves listeners of four kinds at once (ServeKind, listener.go),
// all sharing its upstream configuration, rules and MaxSessions: WebSocket
// over TCP (ListenerWS), WebSocket over a unix socket (ListenerUnix),
// newline-delimited lines over TCP (ListenerTCP), and Server-Sent Events over
// HTTP/1.1 (ListenerSSE). A Session sees its app through one small interface
// (appConn): a WebSocket connection (internal/wsconn); for tcp:// a
// transport.LineConn that reads each line as a text message and writes each
// upstream message as a line, binary messages and line breaks following
// Options.TCPBinary and TCPNewline; for sse:// a transport.SSEApp, which
// outlives the app's HTTP requests: the session waits Options.SSELinger for
// the app's EventSource to reconnect with the id of its last event, and
// resumes it after that event from a buffer bounded by DownstreamBufferBytes
// (the request's admission and resumption: ssesession.go). The transports
// live in internal/transport, which knows nothing of sessions; all three
// queue what they write through one bounded send queue (internal/sendq) and
// take upstream messages in batches (appConn's Append and SendBatch).
// Replay, sequencing, the outbox and the limits therefore apply to every
// kind alike.
// An SSE upstream (Upstream.Kind upstream.KindSSE) takes no messages: what a
// WebSocket or tcp:// app sends is dropped and counted (sseupstream.go).
//
// The upgrade (accept.go) guards a WebSocket listener before anything else
// happens: a web page whose Origin is not allowed and a Host that is neither a
// loopback name nor the listen address (DNS rebinding) are refused with 403
// while the headers are read (internal/browser; a unix socket accepts any Host,
// since no browser can reach it), a request over 16 KiB with 431, a request
// path that cannot be joined onto the upstream URL (Options.ForwardPath,
// internal/forwardpath) with 400, and a request not complete within HandshakeTimeout is
// cut off; none of them is admitted or reaches the upstream. A tcp:// app has
// no handshake and no headers: it is admitted, and its first dial awaited, on
// accept (listener_tcp.go), and a refusal can only close its socket.
//
// A Session pairs the app socket with one upstream.Client. It decides where each
// app message goes (straight upstream while a restored connection is live, into
// the outbox otherwise), flushes the outbox when a new upstream connection is
// restored, and forwards upstream messages to the app through the app socket's
// bounded write queue, whose back-pressure pauses upstream reads.
//
// A Session also restores the application on every new upstream connection
// (docs/design.md "Restoring the application"). What a message is, it asks
// the server's protocol (internal/protocol: Options.Protocol, or the rules
// protocol of Options.Rules), and what the protocol read is remembered in
// the session's protocol.State: the app's latest login and its
// subscriptions as they pass. Each restore (restore.go) sends, in order,
// the login (waiting for its answer), the replay log, the outbox and the
// messages still waiting for an acknowledgement, before the connection goes
// live. Upstream messages the app must not see twice (a second welcome,
// replies to replayed requests, repeated acks) are hidden on the way back.
// Each message is classified once; a protocol that reads neither direction
// (no rules configured) has no message content looked at. The capabilities
// the rules protocol lacks and other protocols have are honoured for every
// listener kind alike: split and joined messages, each routed alone
// (framing.go); the app's keepalives answered, and the beats it expects
// sent, while no upstream connection is live (keepalive.go); subscriptions
// replayed as the protocol rewrites them from the session's current state
// (restore.go).
//
// With Options.Sequences, a Session also sequences upstream messages (docs/design.md
// "Sequences and gap filling"): per stream, duplicates are dropped and the
// successors of a gap are held (buffer.Tracker) until the gap is filled by
// the live stream, by the replay a resume message asked for on the new
// connection (the restore's second step, after the login), or over HTTP
// (Sequences.GapFillURL), or until the gap timeout hands it to the gap
// policy. The protocol reads what sequencing needs in one pass over each
// message (protocol.Fields, which is sequence.Fields); the rest is the
// session's Sequencer (internal/sequence), nil when sequencing is off.
//
// Countable events (sessions and messages, by listener kind; messages
// dropped by transport rules, outbox drops, refused handshakes, the drain,
// duplicates, gaps and recoveries) go to Options.Metrics, an interface
// cmd/tether backs with Prometheus collectors; the outbox depth is read on
// demand with Server.OutboxMessages. Server.Status reports each session for
// the admin server's status page (status.go): its upstream client's Status,
// its outbox depth, and its own counts of duplicates, gaps and recoveries,
// which the sequencing's events pass through on their way to Metrics.
//
// Concurrency: a Server is safe for concurrent use. Each Session has one goroutine
// reading the app (started once the handshake is done), one sending keepalive
// beats when its protocol has them, the app connection's writer goroutine only
// for what its socket did not take at once (the goroutine that queues a burst
// writes it itself: internal/wsconn), and the client's own goroutines, which
// reach the session through upstreamHandler, its upstream.Handler (the reader
// calls Message and Flush, a restore goroutine per connection calls Restore,
// the goroutine that drives the client's state machine, started per event,
// calls Lost, and Stopped, upstreamStopped, which closes the app when the
// client gives up); Session.mu guards the live
// connection pointer, the outbox and the protocol state, and is never held
// across I/O. A restore waiting for the login answer is released by the
// reader through a channel.
//
// A Session's Sequencer has its own lock, delivery turn, gap timers and
// catch-up goroutines (internal/sequence); the session never holds mu while
// calling it. Sequenced messages reach the app through the session's batch
// (seqApp, handler.go) from whichever goroutine holds the Sequencer's turn:
// the upstream reader, which keeps it across a burst until its Flush, a gap
// timer or a catch-up. The session stops the Sequencer, which waits for its
// timers and catch-ups, once its upstream reader is gone.
package proxy
