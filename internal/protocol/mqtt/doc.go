// Package mqtt is the mqtt preset (TETHER_PROTOCOL=mqtt): an
// implementation of protocol.Protocol for MQTT 3.1.1 and MQTT 5 over
// WebSocket (subprotocol "mqtt"), so that an operator sets only the
// upstream URL and an unmodified MQTT client (mqtt.js, Paho) keeps its
// connection through broker restarts longer than its keepalive.
//
// Framing (framer.go): MQTT over WebSocket is a byte stream in binary
// messages; a message may hold several packets or part of one (MQTT 5 §6).
// Each direction is split into whole packets by the remaining length of
// the fixed header, bounded by TETHER_MAX_MESSAGE_BYTES, and each packet
// travels on as its own binary message. A text message, a malformed
// remaining length or a packet over the bound cannot be framed.
//
// What it reads (mqtt.go), for both versions: the app's CONNECT is the
// login, re-sent first on every connection, and the CONNACK is awaited
// before anything else and hidden from the app after the first; only a
// successful one confirms the connection (after a refusal the broker
// closes it, and tether reconnects). A SUBSCRIBE or UNSUBSCRIBE of one topic
// filter is keyed by the filter: an UNSUBSCRIBE cancels its SUBSCRIBE, a
// repeated SUBSCRIBE replaces the earlier one, and the replay log replays
// what is left; one of several filters is replayed as the app sent it, in
// order. An UNSUBSCRIBE of one filter sent during an outage still goes
// to the broker on the next connection, with the SUBSCRIBE it cancels
// when that one was not answered yet (the folded requests of
// protocol.State.Fold): the app awaits their SUBACK and UNSUBACK, and a
// persistent session may hold the subscription. The SUBACK or UNSUBACK of a replay (matched by packet
// identifier) is hidden. A PINGREQ is answered with a PINGRESP by tether
// while no upstream connection is live, and so is one sent on a connection
// lost before its PINGRESP. A PUBLISH of QoS 1 or 2 waits for its PUBACK or
// PUBREC, a PUBREL for its PUBCOMP; those still waiting when a connection
// is lost are re-sent on the next, a PUBLISH with DUP set (Resend), and a
// repeated ack is hidden.
//
// A SUBSCRIBE's payload differs between the versions (MQTT 5 puts a
// property list before the filters), and a classifier sees one packet, not
// the CONNECT that named the version: the payload is read both ways, and a
// packet the two readings disagree on stays unkeyed (replayed as sent).
//
// Packet identifiers: tether makes up none. Replays carry the identifier
// the app gave them, re-sent PUBLISHes and PUBRELs theirs (which the app
// still holds in flight), and tether's PINGRESP has none. A replay's
// identifier is one whose reply the app has seen, so the app may be using
// it again; a restore therefore waits for the SUBACK or UNSUBACK of every
// replay (AwaitReplies) before it sends anything of the app's, and the
// broker never sees one identifier in flight twice.
//
// The upstream's liveness is WebSocket pings (TETHER_PING_INTERVAL), which
// brokers answer below MQTT: a PINGREQ of tether's own would be answered by
// a PINGRESP that cannot be told from the answer to the app's.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use; a
// Framer belongs to one direction of one connection.
package mqtt
