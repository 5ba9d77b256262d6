// Package graphqlws is the graphql-ws preset (TETHER_PROTOCOL=graphql-ws):
// an implementation of protocol.Protocol for the graphql-transport-ws
// subprotocol of the graphql-ws library (its PROTOCOL.md), so that an
// operator sets only the upstream URL and an unmodified graphql-ws client
// survives server restarts and outages.
//
// What it reads (graphqlws.go): the app's connection_init is the login,
// re-sent first on every connection, and the server's connection_ack is
// awaited before anything else and hidden from the app after the first
// (it also confirms the connection). A subscribe starts an operation,
// keyed by its id; the server's complete or error for that id ends it, and
// an ended operation is never replayed. The app's complete cancels its
// operation, and is sent only while the operation is active: one the
// server ended already is dropped. The app's ping is answered with a pong
// by tether while no upstream connection is live, and so is a ping sent on
// a connection lost before the server's pong came back.
//
// Queries and mutations travel as subscribe too. Their document says which
// they are (operation.go, a small lexer honouring operationName), and by
// default they are at most once: one in flight when its connection is lost
// is not run again, the app gets a graphql-ws error for its id instead
// (Abandoned), while one the app starts during an outage is sent once when
// the upstream is back. Rerun relaxes this per kind (TETHER_GRAPHQL_RERUN).
//
// The close codes of the protocol (codes.go) are the preset's defaults for
// TETHER_PERMANENT_CODES and TETHER_REAUTH_CODES.
//
// Concurrency: a Protocol keeps no state and is safe for concurrent use.
package graphqlws
