// Package protocol owns everything tether knows about the content of the
// messages it forwards, behind one interface, Protocol: what an app message
// is (a login, a subscribe or unsubscribe and its key, a request's reply id,
// an acknowledged send, a keepalive), what an upstream message is (a login
// answer, a message the app sees once, a reply, an ack, the end of a
// subscription, the sequence fields, and through Capabilities a
// confirmation and a heartbeat reply), and how a protocol frames, keeps
// alive and replays its messages. A session asks it and nothing else; a new
// protocol is a new implementation, not edits across the session.
//
// Today's TETHER_* rules are one implementation, NewRules (rules.go): the
// compiled matchers and paths, read in one pass over each message's top
// level (scan.go, topscan.go, fields.go; fuzzed against gjson). It reads
// only what its variables ask for, and has no framing, keepalive or replay
// rewriting: no variable asks for them, so its Capabilities leave them
// unset. Protocols such as graphql-ws, Centrifugo, MQTT, STOMP or NATS set
// them: Framing for several commands in one WebSocket message (Centrifugo,
// NATS) or a packet spanning several (MQTT); Keepalive to answer the app's
// pings and send the beats its client library expects while the upstream
// is down; Replay to rewrite a subscription from the current state (a
// Centrifugo subscribe that recovers from the last offset); AwaitReplies to
// hold the app's messages back until the replays are answered (MQTT packet
// identifiers, which replays share with the app); Resend to mark
// a message re-sent after a reconnect (MQTT's DUP flag); Upstream.Ends for
// a server that ends a subscription (graphql-ws complete).
//
// State is what one session remembers of the conversation, as its protocol
// classified it: the latest login, the replay log, the replies looked for
// on the current connection, the messages waiting for an ack and the ids
// already acknowledged, and which upstream messages are hidden from the app
// because of it. It lives here, not in the session, because only the
// classification gives it meaning, and it is the same for every protocol:
// protocols differ in how they read messages, not in what is remembered of
// them. The session keeps the rest: the outbox (whose caps the ack store
// shares), the live connection, when a snapshot was taken (so messages
// arriving during a restore are not lost), and the restore order.
//
// Concurrency: a Protocol is shared by every session of a server and is
// safe for concurrent use; its methods keep no state. A Framer belongs to
// one direction of one connection and is used by one goroutine. A State is
// guarded by its session's lock; its methods, and a Replayer's, do no I/O
// and never block, so they may run under that lock.
package protocol
