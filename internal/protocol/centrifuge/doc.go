// Package centrifuge is the centrifuge preset (TETHER_PROTOCOL=centrifuge):
// an implementation of protocol.Protocol for the JSON protocol (v2) of
// Centrifugo and of servers built on the centrifuge Go library, as its
// client SDKs (centrifuge-js, centrifuge-go) speak it, so that an operator
// sets only the upstream URL and an unmodified client survives server
// restarts and outages without its own reconnect ever firing.
//
// Framing (framing.go): a client packs several commands into one
// WebSocket message and a server several replies, separated by "\n"; each
// is read, routed and delivered on its own. A binary message (the
// protobuf protocol) cannot be framed: the app is closed with 1002.
//
// What it reads (centrifuge.go): the app's connect is the login, re-sent
// first on every connection, whose reply is awaited (it also confirms the
// connection) and hidden from the app after the first. A subscribe is
// keyed by its channel and replayed (Replay, replay.go) with recover: true
// and the channel's last offset and epoch: the offset of the last
// publication the app got, the epoch of the last subscribe reply. A
// server's unsubscribe push ends the subscription. Publications are
// sequenced per channel by their offset: duplicates are dropped, gaps held
// and filled by what the server recovers.
//
// Replies (reply.go) do not name their channel, so the preset reads them
// with the subscription they answer (Capabilities.Reply): a subscribe
// reply's epoch and offset are remembered for the next replay; the
// publications a recovering reply to tether's replay carries are delivered
// to the app in order as the pushes they stand for (the reply itself is
// hidden); and a reply that could not recover (the epoch changed: the
// server lost its history, a new broker) resets the channel's stream and
// reaches the app in the protocol's own terms, as a Centrifuge server's
// "insufficient state" unsubscribe push (code 2500), after tether has
// unsubscribed the channel upstream: the app's client library subscribes
// again at once, recovering from its own position, and the server's reply
// tells it, with recovered false, that it must load the state it lost. A
// subscribe error for a replay does the same.
//
// Keepalive: the server pings with an empty command, {}, which the app
// answers while a connection is live. While none is, tether pings the app
// every KeepaliveEvery (its client library gives a connection up when no
// ping came within the server's ping interval plus its own
// maxServerPingDelay), and drops the app's pongs: a server disconnects a
// client for a pong it did not ask for.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use;
// a Framer is one goroutine's.
package centrifuge
