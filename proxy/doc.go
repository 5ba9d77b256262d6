// Package proxy owns tether's local side: the listener, the WebSocket upgrade of
// each app connection, and one Session per app connection.
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
// Countable events (sessions, messages, outbox drops, refused handshakes, the
// drain) go to Options.Metrics, an interface cmd/tether backs with Prometheus
// collectors; the outbox depth is read on demand with Server.OutboxMessages.
//
// Concurrency: a Server is safe for concurrent use. Each Session has one goroutine
// reading the app (the one that accepted it), one watching its upstream client, and
// the client's own goroutines (the reader calls Message, a restore goroutine per
// connection calls Restore); Session.mu guards the live connection pointer, the
// outbox and the restore state, and is never held across I/O. A restore waiting
// for the login answer is released by the reader through a channel.
package proxy
