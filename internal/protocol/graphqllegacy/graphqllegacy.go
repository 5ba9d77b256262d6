package graphqllegacy

import (
	"encoding/json"
	"time"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
)

// Subprotocol is the WebSocket subprotocol the app offers and tether keeps.
const Subprotocol = "graphql-ws"

// KeepaliveEvery is how often the app gets a ka while no upstream
// connection is live. The client library closes when it sees no ka within
// its timeout (SubscriptionClient's timeout option, 30 s by default,
// restarted on each ka), and servers send one every few seconds to every
// 30 s: one a second is shorter than any timeout a client would set with a
// server that sends ka at all, and costs a few bytes a second during an
// outage only.
const KeepaliveEvery = time.Second

// Options configure the preset.
type Options struct {
	// Rerun says which operations in flight on a lost connection are sent
	// again (TETHER_GRAPHQL_RERUN); subscriptions always are.
	Rerun graphqlws.Rerun
}

// Protocol is the graphql-ws-legacy preset (doc.go).
type Protocol struct {
	rerun graphqlws.Rerun
}

// New returns the preset.
func New(o Options) *Protocol { return &Protocol{rerun: o.Rerun} }

// Message types of subscriptions-transport-ws.
const (
	typeInit     = "connection_init"
	typeAck      = "connection_ack"
	typeKA       = "ka"
	typeStart    = "start"
	typeStop     = "stop"
	typeComplete = "complete"
	typeError    = "error"
)

var ka = protocol.Message{Op: ws.OpText, Data: []byte(`{"type":"ka"}`)}

// Capabilities of the preset: it reads both directions, awaits the ack,
// keeps the app's ka coming while down and reports abandoned operations.
func (p *Protocol) Capabilities() protocol.Capabilities {
	return protocol.Capabilities{
		ReadsApp: true, ReadsUpstream: true,
		AwaitLogin: true,
		Confirm:    isAck,
		Keepalive:  protocol.Keepalive{Every: KeepaliveEvery, Beat: ka},
		Abandoned:  abandoned,
	}
}

// dialect is subscriptions-transport-ws's app side: no ping, the client
// library sends none.
var dialect = graphqlws.Dialect{Init: typeInit, Start: typeStart, Stop: typeStop}

// App classifies an app message (graphqlws.ClassifyApp). What is not
// valid for the protocol (not JSON, no type, an id that is not a string)
// is plain: the server answers it as it would without tether.
func (p *Protocol) App(data []byte) protocol.App {
	return graphqlws.ClassifyApp(data, dialect, p.rerun)
}

// Upstream classifies a server message: the ack answers the login, and a
// complete or an error for an id ends its operation (the client library
// forgets an operation on either).
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	r := gjson.GetManyBytes(data, "type", "id")
	switch r[0].Str {
	case typeAck:
		return protocol.Upstream{LoginOK: true}
	case typeComplete, typeError:
		if id, ok := graphqlws.OperationID(r[1]); ok {
			return protocol.Upstream{Ends: true, EndKey: id}
		}
	}
	return protocol.Upstream{}
}

func isAck(data []byte) bool { return gjson.GetBytes(data, "type").Str == typeAck }

// LostMessage is the error an abandoned operation ends with.
const LostMessage = graphqlws.LostMessage

// abandoned is the error the app gets for an operation lost in flight: an
// error message for its id. The client library hands its payload to the
// operation's handler as the errors and forgets the operation; a payload
// with a message is what the library's own errors look like.
func abandoned(e protocol.Entry) protocol.Message {
	id, _ := json.Marshal(e.Key)
	data := make([]byte, 0, 80+len(id)+len(LostMessage))
	data = append(data, `{"id":`...)
	data = append(data, id...)
	data = append(data, `,"type":"error","payload":{"message":"`...)
	data = append(data, LostMessage...)
	data = append(data, `"}}`...)
	return protocol.Message{Op: ws.OpText, Data: data}
}
