// Package stomp is the STOMP preset (TETHER_PROTOCOL=stomp): an
// implementation of protocol.Protocol for STOMP 1.2 over WebSocket (as
// RabbitMQ's Web STOMP plugin and ActiveMQ serve it, and as
// @stomp/stompjs speaks it), so that an operator sets only the upstream
// URL and an unmodified STOMP client survives broker restarts and outages
// longer than its heart-beat timeout.
//
// Framing (frame.go): frames end in NUL, or after content-length bytes and
// the NUL behind them; EOLs between frames are heart-beats. A WebSocket
// message may hold several frames, and a frame may span messages: each
// frame (with the EOLs right behind it) is classified and sent on alone,
// and so is a run of heart-beat EOLs.
//
// What it reads (stomp.go): the app's CONNECT (or STOMP) is the login,
// re-sent first on every connection, and the broker's CONNECTED is awaited
// before anything else and hidden from the app after the first (it also
// confirms the connection). SUBSCRIBE and UNSUBSCRIBE are keyed by their
// id header: a restore replays the subscriptions still active, and the
// RECEIPT of a replayed one the app asked a receipt for is hidden. A SEND
// with a receipt header is kept until its RECEIPT and re-sent after a
// reconnect: at least once. ACK and NACK name a message of the connection
// that delivered it: one for a message of a lost connection is dropped
// and counted, never sent on another, which would take it for a protocol
// error (the broker delivers that message again instead). Whenever the
// app has had nothing for the heart-beat interval it negotiated with the
// broker (the heart-beat headers of CONNECT and CONNECTED), tether sends
// it a heart-beat: while the broker is down, and while a live broker skips
// its own (RabbitMQ does when its pongs to tether's pings went out). While
// the broker is down, the app's own heart-beats are answered, not queued.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use; a
// Framer belongs to one direction of one connection.
package stomp
