package graphqlws

// Close codes of graphql-transport-ws (PROTOCOL.md of graphql-ws), as the
// preset's defaults for TETHER_PERMANENT_CODES and TETHER_REAUTH_CODES; an
// explicit variable replaces them.
//
//   - Permanent, passed to the app with the server's code: 4400 Bad request
//     (the server refused a message; the same message is refused again),
//     4403 Forbidden (the server refused the app's connection_init payload,
//     which is all tether can re-send), 4406 Subprotocol not acceptable,
//     4409 Subscriber already exists (an id used twice: replaying it would
//     repeat the fault). With them the RFC 6455 codes of the generic
//     default (upstream.DefaultPermanentCodes).
//   - Reauth, credentials re-read (TETHER_UPSTREAM_TOKEN_FILE) before the
//     next dial: 4401 Unauthorized. graphql-ws sends it for a subscribe
//     before connection_ack, which tether never does (it waits for the ack);
//     servers also use it for an expired token, which a rotated token file
//     fixes.
//   - Everything else reconnects: 4500 Internal server error, 4408
//     Connection initialisation timeout, 4429 Too many initialisation
//     requests, 4504 Connection acknowledgement timeout, as well as 1001
//     and 1006. 4004, 4005 and 4499 are the client library's own codes and
//     never come from a server.
const (
	PermanentCodes = "1002,1003,1007,1008,1009,1010,4400,4403,4406,4409"
	ReauthCodes    = "4401"
)

// Subprotocol is the WebSocket subprotocol the app offers and tether keeps.
const Subprotocol = "graphql-transport-ws"
