package graphqlws

import (
	"encoding/json"
	"fmt"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Rerun says which operations in flight when their connection was lost are
// sent again on the next one (TETHER_GRAPHQL_RERUN). Subscriptions always
// are: they stream until ended, and a new connection has none.
type Rerun uint8

const (
	// RerunNone: queries and mutations run at most once (the default).
	RerunNone Rerun = iota
	// RerunQueries: queries are re-run, mutations run at most once.
	RerunQueries
	// RerunAll: queries and mutations are re-run: at least once.
	RerunAll
)

var rerunNames = [...]string{"none", "queries", "all"}

// String returns the TETHER_GRAPHQL_RERUN spelling.
func (r Rerun) String() string {
	if int(r) < len(rerunNames) {
		return rerunNames[r]
	}
	return fmt.Sprintf("Rerun(%d)", r)
}

// UnmarshalText parses none, queries or all.
func (r *Rerun) UnmarshalText(b []byte) error {
	for i, n := range rerunNames {
		if string(b) == n {
			*r = Rerun(i)
			return nil
		}
	}
	return fmt.Errorf("%q: want none, queries or all", b)
}

// Options configure the preset.
type Options struct {
	Rerun Rerun
}

// Protocol is the graphql-ws preset (doc.go).
type Protocol struct {
	rerun Rerun
}

// New returns the preset.
func New(o Options) *Protocol { return &Protocol{rerun: o.Rerun} }

// Message types of graphql-transport-ws.
const (
	typeInit      = "connection_init"
	typeAck       = "connection_ack"
	typePing      = "ping"
	typePong      = "pong"
	typeSubscribe = "subscribe"
	typeComplete  = "complete"
	typeError     = "error"
)

// Capabilities of the preset: it reads both directions, awaits the ack,
// answers pings while down and reports abandoned operations.
func (p *Protocol) Capabilities() protocol.Capabilities {
	return protocol.Capabilities{
		ReadsApp: true, ReadsUpstream: true,
		AwaitLogin: true,
		Confirm:    isAck,
		Keepalive:  protocol.Keepalive{Answer: pong},
		Abandoned:  abandoned,
	}
}

// App classifies an app message (ClassifyApp). What is not valid
// graphql-ws (not JSON, no type) is plain: the server answers it with
// 4400, as it would without tether.
func (p *Protocol) App(data []byte) protocol.App { return ClassifyApp(data, TransportWS, p.rerun) }

// Upstream classifies a server message: the ack answers the login, a pong
// the app's ping, and a complete or an error ends its operation.
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	r := gjson.GetManyBytes(data, "type", "id")
	switch r[0].Str {
	case typeAck:
		return protocol.Upstream{LoginOK: true}
	case typePong:
		return protocol.Upstream{KeepaliveReply: true}
	case typeComplete, typeError:
		// gjson reads fields out of malformed JSON too; an end is acted on
		// only when the whole message is JSON (ends are rare: no hot path).
		if id, ok := OperationID(r[1]); ok && gjson.ValidBytes(data) {
			return protocol.Upstream{Ends: true, EndKey: id}
		}
	}
	return protocol.Upstream{}
}

func isAck(data []byte) bool { return gjson.GetBytes(data, "type").Str == typeAck }

// pong answers the app's ping while the upstream is down (PROTOCOL.md: a
// ping must be answered with a pong as soon as possible).
func pong([]byte) protocol.Message {
	return protocol.Message{Op: ws.OpText, Data: []byte(`{"type":"pong"}`)}
}

// LostMessage is the GraphQL error an abandoned operation ends with.
const LostMessage = "tether: upstream connection lost while the operation was in flight; not re-run"

// abandoned is the error the app gets for an operation lost in flight: an
// error message for its id, whose payload is a list of GraphQL errors.
func abandoned(e protocol.Entry) protocol.Message {
	id, _ := json.Marshal(e.Key)
	data := make([]byte, 0, 96+len(id)+len(LostMessage))
	data = append(data, `{"id":`...)
	data = append(data, id...)
	data = append(data, `,"type":"error","payload":[{"message":"`...)
	data = append(data, LostMessage...)
	data = append(data, `"}]}`...)
	return protocol.Message{Op: ws.OpText, Data: data}
}
