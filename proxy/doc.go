// Package proxy owns tether's local side: the listener, the WebSocket upgrade of
// each app connection, and one Session per app connection.
//
// The upgrade (accept.go) guards the listener before anything else happens: a
// web page whose Origin is not allowed and a Host that is neither a loopback
// name nor the listen address (DNS rebinding) are refused with 403 while the
// headers are read (browser.go), a request over 16 KiB with 431, and a request
// not complete within HandshakeTimeout is cut off; none of them is admitted or
// reaches the upstream.
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
// Countable events (sessions, messages, outbox drops, refused handshakes, the
// drain, duplicates, gaps and recoveries) go to Options.Metrics, an interface cmd/tether backs with Prometheus
// collectors; the outbox depth is read on demand with Server.OutboxMessages.
//
// Concurrency: a Server is safe for concurrent use. Each Session has one goroutine
// reading the app (the one that accepted it), one watching its upstream client, and
// the client's own goroutines (the reader calls Message, a restore goroutine per
// connection calls Restore); Session.mu guards the live connection pointer, the
// outbox and the restore state, and is never held across I/O. A restore waiting
// for the login answer is released by the reader through a channel.
//
// Sequenced messages are delivered by the upstream reader, by a gap timer
// (time.AfterFunc) applying the policy and by a goroutine per HTTP catch-up;
// each runs the tracker under Session.mu and sends what it released after
// unlocking, holding the session's delivery turn (seqState.turn, taken
// before mu) from the tracker call until its messages are queued, so the
// app gets them in the order the tracker produced them. Timers and fetches
// register with the session and are stopped and waited for when it ends.
package proxy
