// Package proxy owns tether's local side: the listener, the WebSocket upgrade of
// each app connection, and one Session per app connection.
//
// A Session pairs the app socket with one upstream.Client. It decides where each
// app message goes (straight upstream while a restored connection is live, into
// the outbox otherwise), flushes the outbox when a new upstream connection is
// restored, and forwards upstream messages to the app through the app socket's
// bounded write queue, whose back-pressure pauses upstream reads.
//
// Concurrency: a Server is safe for concurrent use. Each Session has one goroutine
// reading the app (the one that accepted it), one watching its upstream client, and
// the client's own goroutines; Session.mu guards only the live connection pointer
// and the outbox, and is never held across I/O.
package proxy
