package graphqlws

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Dialect names the app message types of a GraphQL-over-WebSocket
// protocol. Both tether reads classify the app's messages alike, by type
// and operation id, and differ in names only: graphql-transport-ws (this
// package: connection_init, subscribe, complete, ping) and
// subscriptions-transport-ws (internal/protocol/graphqllegacy:
// connection_init, start, stop, no ping).
type Dialect struct {
	Init  string // the login
	Start string // an operation's start: a subscription, query or mutation
	Stop  string // the app's end of an operation
	Ping  string // the app's keepalive; "" when the app sends none
}

// TransportWS is graphql-transport-ws, this package's protocol.
var TransportWS = Dialect{Init: typeInit, Start: typeSubscribe, Stop: typeComplete, Ping: typePing}

// ClassifyApp classifies an app message of dialect d; rerun says which
// operations are at least once (AtMostOnce). What is not valid for the
// protocol (not JSON, no type, an operation id that is not a string) is
// plain: the server answers it as it would without tether.
func ClassifyApp(data []byte, d Dialect, rerun Rerun) protocol.App {
	r := gjson.GetManyBytes(data, "type", "id")
	switch t := r[0].Str; {
	case t == "":
	case t == d.Init:
		return protocol.App{Kind: protocol.AppLogin}
	case t == d.Ping:
		return protocol.App{Kind: protocol.AppKeepalive}
	case t == d.Start:
		if id, ok := OperationID(r[1]); ok {
			return protocol.App{Kind: protocol.AppSubscribe, Key: id, Keyed: true, AtMostOnce: AtMostOnce(data, rerun)}
		}
	case t == d.Stop:
		if id, ok := OperationID(r[1]); ok {
			return protocol.App{Kind: protocol.AppUnsubscribe, Key: id, Keyed: true, IfActive: true}
		}
	}
	return protocol.App{}
}

// OperationID is an operation's id: a JSON string, which is UTF-8. gjson
// hands invalid bytes through as they are where a JSON decoder would read
// U+FFFD, so such an id names no operation reliably and the message is
// left unclassified (forwarded as it is, never replayed).
func OperationID(r gjson.Result) (string, bool) {
	if r.Type != gjson.String || !utf8.ValidString(r.Str) {
		return "", false
	}
	return r.Str, true
}

// AtMostOnce reports whether the operation an app's start carries in data
// must not run twice: a query or a mutation, as rerun has it. An operation
// whose type cannot be read is at most once unless everything is re-run:
// re-running a mutation is the harm to avoid.
func AtMostOnce(data []byte, rerun Rerun) bool {
	r := gjson.GetManyBytes(data, "payload.query", "payload.operationName")
	switch Operation(r[0].Str, r[1].Str) {
	case OpSubscription:
		return false
	case OpQuery:
		return rerun < RerunQueries
	}
	return rerun < RerunAll
}
