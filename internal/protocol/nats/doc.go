// Package nats is the NATS preset (TETHER_PROTOCOL=nats): an
// implementation of protocol.Protocol for the NATS client protocol over
// WebSocket (nats-server's websocket listener, the nats.ws client), so
// that an operator sets only the upstream URL and an unmodified NATS
// client survives server restarts and outages longer than its ping
// timeout.
//
// Framing (frame.go): a WebSocket message may hold several operations, and
// one may span messages; each operation (a control line, and a PUB's,
// HPUB's, MSG's or HMSG's payload) is classified and sent on alone, so a
// replay sends only what it means to: of a message holding a SUB and a
// PUB, the SUB.
//
// What it reads (nats.go): the app's CONNECT is the login, re-sent first on
// every connection (NATS answers it with nothing unless verbose, so
// nothing is awaited: the server takes the SUBs right behind it). SUB and
// UNSUB are keyed by sid: a restore replays the subscriptions still
// active; an UNSUB with a maximum of messages is replayed behind its SUB,
// and the server counts the maximum anew. The INFO every connection starts
// with reaches the app once. While no connection is live, tether answers
// the app's PING with PONG, and a PING in flight on a lost connection too.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use; a
// Framer belongs to one direction of one connection.
package nats
