// Package proxy owns tether's local side: the listeners, the WebSocket upgrade
// of each app connection, and one Session per app connection.
//
// A Server serves listeners of four kinds at once (ServeKind, listener.go),
// all sharing its upstream configuration, rules and MaxSessions: WebSocket
// over TCP (ListenerWS), WebSocket over a unix socket (ListenerUnix),
// newline-delimited lines over TCP (ListenerTCP), and Server-Sent Events over
// HTTP/1.1 (ListenerSSE). A Session sees its app through one small interface
// (appConn): a WebSocket connection; for tcp:// a line connection (lines.go)
// that reads each line as a text message and writes each upstream message as
// a line, binary messages and line breaks following Options.TCPBinary and
// TCPNewline; for sse:// an sseApp (sseapp.go), which outlives the app's HTTP
// requests: the session waits Options.SSELinger for the app's EventSource to
// reconnect with the id of its last event, and resumes it after that event
// from a buffer bounded by DownstreamBufferBytes (ssesession.go). Replay,
// sequencing, the outbox and the limits therefore apply to every kind alike.
// An SSE upstream (Upstream.Kind upstream.KindSSE) takes no messages: what a
// WebSocket or tcp:// app sends is dropped and counted (sseupstream.go).
//
// The upgrade (accept.go) guards a WebSocket listener before anything else
// happens: a web page whose Origin is not allowed and a Host that is neither a
// loopback name nor the listen address (DNS rebinding) are refused with 403
// while the headers are read (browser.go; a unix socket accepts any Host,
// since no browser can reach it), a request over 16 KiB with 431, a request
// path that cannot be joined onto the upstream URL (Options.ForwardPath,
// forward.go) with 400, and a request not complete within HandshakeTimeout is
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
// (Options.Rules, DESIGN.md "Restoring the application"): it remembers the
// app's latest login and logs its subscriptions as they pass, and its
// Restore sends, in order, the login (waiting for its answer), the replay
// log, the outbox and the messages still waiting for an acknowledgement,
// before the connection goes live. Upstream messages the app must not see
// twice (a second welcome, replies to replayed requests, repeated acks) are
// hidden on the way back. Each message is classified once; with no rules
// configured, no message content is looked at.
//
// With Rules.Sequences, a Session also sequences upstream messages (DESIGN.md
// "Sequences and gap filling"): per stream, duplicates are dropped and the
// successors of a gap are held (buffer.Tracker) until the gap is filled by
// the live stream, by the replay a resume message asked for on the new
// connection (the restore's second step, after the login), or over HTTP
// (Sequences.GapFillURL), or until the gap timeout hands it to the gap
// policy. The configured paths are read in one pass over each message.
//
// Countable events (sessions and messages, by listener kind; messages
// dropped by transport rules, outbox drops, refused handshakes, the drain,
// duplicates, gaps and recoveries) go to Options.Metrics, an interface
// cmd/tether backs with Prometheus collectors; the outbox depth is read on
// demand with Server.OutboxMessages.
//
// Concurrency: a Server is safe for concurrent use. Each Session has one goroutine
// reading the app (the one that accepted it), one watching its upstream client,
// the app connection's writer goroutine, and the client's own goroutines (the reader calls Message, a restore goroutine per
// connection calls Restore); Session.mu guards the live connection pointer, the
// outbox and the restore state, and is never held across I/O. A restore waiting
// for the login answer is released by the reader through a channel.
//
// Sequenced messages are delivered by the upstream reader, by a gap timer
// (time.AfterFunc) applying the policy and by a goroutine per HTTP catch-up;
// each runs the tracker under Session.mu and sends what it released after
// unlocking, holding the session's delivery turn (seqState.turn, taken
// before mu) from the tracker call until its messages are queued, so the
// app gets them in the order the tracker produced them. The upstream reader
// keeps the turn across a burst of messages already buffered and releases
// it in Flush, called before any read that may wait, so gap timers and
// fetches wait for at most one burst. Timers and fetches register with the
// session and are stopped and waited for when it ends.
package proxy
