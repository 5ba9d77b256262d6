// Package graphqllegacy is the graphql-ws-legacy preset
// (TETHER_PROTOCOL=graphql-ws-legacy): an implementation of
// protocol.Protocol for the protocol of the subscriptions-transport-ws
// library (its PROTOCOL.md), spoken on the WebSocket subprotocol
// "graphql-ws", the predecessor of graphql-transport-ws (package graphqlws),
// still spoken by Apollo's older clients and servers.
//
// What it reads (graphqllegacy.go): the app's connection_init is the login,
// re-sent first on every connection, and the server's connection_ack is
// awaited before anything else and hidden from the app after the first (it
// also confirms the connection). A start begins an operation, keyed by its
// id; the server's complete or error for that id ends it, and an ended
// operation is never replayed. The app's stop cancels its operation, and is
// sent only while the operation is active: one the server ended already is
// dropped.
//
// Queries and mutations travel as start too, and are at most once as in
// the graphql-ws preset (its operation lexer reads which they are): one in
// flight when its connection is lost is not run again, the app gets an
// error message for its id instead (Abandoned), and one the app starts
// during an outage is sent once when the upstream is back. TETHER_GRAPHQL_RERUN
// relaxes this per kind, as for graphql-ws.
//
// The protocol has no client ping: the client library watches the server's
// ka instead, and closes its socket when none came within its timeout
// (30 s by default). While no upstream connection is live, tether sends the
// app a ka every KeepaliveEvery, a documented default shorter than any
// client timeout in use, so an outage longer than the client's timeout does
// not end the app's socket.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use.
package graphqllegacy
