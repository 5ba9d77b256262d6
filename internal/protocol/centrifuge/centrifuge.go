package centrifuge

import (
	"time"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
)

// KeepaliveEvery is how often the app gets a ping while no upstream
// connection is live. centrifuge-js gives a connection up when no ping
// came within the server's ping interval (25 s by default) plus its
// maxServerPingDelay (10 s by default), restarted by anything it
// receives: one a second is shorter than any such sum, and costs a few
// bytes a second during an outage only.
const KeepaliveEvery = time.Second

// Close codes of the protocol (the centrifuge library's disconnect.go), as
// the preset's defaults for TETHER_PERMANENT_CODES: a server that sent one
// of them would refuse the same connect again, and the app is closed with
// it. 3500 invalid token, 3501 bad request, 3502 stale, 3503 force no
// reconnect, 3504 connection limit, 3505 channel limit, 3506 inappropriate
// protocol, 3507 permission denied, 3508 not available, 3509 too many
// errors; with them the RFC 6455 codes of the generic default. Everything
// else reconnects: 3000–3499 are the library's "reconnect" codes (3001
// shutdown, 3005 force reconnect, 3008 slow, 3010 buffer overflow, 3012 no
// pong), as well as 1001 and 1006. An expired token (3500 invalid token,
// or the connect error 109 token expired) is the app's to refresh: tether
// re-sends the app's connect, and has no other token.
const PermanentCodes = "1002,1003,1007,1008,1009,1010,3500,3501,3502,3503,3504,3505,3506,3507,3508,3509"

// Options configure the preset; none yet.
type Options struct{}

// Protocol is the centrifuge preset (doc.go).
type Protocol struct{}

// New returns the preset.
func New(Options) *Protocol { return &Protocol{} }

var ping = protocol.Message{Op: ws.OpText, Data: []byte(`{}`)}

// Capabilities of the preset: it frames, reads both directions, awaits the
// connect reply, sequences publications per channel, pings the app while
// down, rewrites replayed subscribes and reads subscribe replies.
func (p *Protocol) Capabilities() protocol.Capabilities {
	return protocol.Capabilities{
		ReadsApp: true, ReadsUpstream: true,
		Sequences: true, Streams: true,
		AwaitLogin: true,
		Confirm:    isConnectReply,
		Framing:    newFramer,
		Keepalive:  protocol.Keepalive{Every: KeepaliveEvery, Beat: ping, DropWhileDown: true, OnlyAsked: true},
		Replay:     replayer{},
		Reply:      reply,
	}
}

// App classifies one command. A command names its method by the one
// field it has besides id; what is not a connect, subscribe or unsubscribe
// (publish, rpc, history, presence, refresh, send) is plain, and so is
// what is not valid for the protocol: the server answers it as it would
// without tether.
func (p *Protocol) App(data []byte) protocol.App {
	if isEmptyObject(data) {
		return protocol.App{Kind: protocol.AppKeepalive} // a pong
	}
	r := gjson.GetManyBytes(data, "id", "connect", "subscribe.channel", "unsubscribe.channel")
	id := replyID(r[0])
	switch {
	case r[1].IsObject():
		return protocol.App{Kind: protocol.AppLogin, ReplyID: id}
	case r[2].Type == gjson.String:
		return protocol.App{Kind: protocol.AppSubscribe, Key: r[2].Str, Keyed: true, ReplyID: id}
	case r[3].Type == gjson.String:
		return protocol.App{Kind: protocol.AppUnsubscribe, Key: r[3].Str, Keyed: true, ReplyID: id}
	}
	return protocol.App{}
}

// Upstream classifies one reply or push: a ping ({}) asks the app for a
// pong, a connect reply answers the login, a reply its request by id, a
// publication carries its channel's offset, and an unsubscribe push ends
// its channel's subscription.
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	if isEmptyObject(data) {
		return protocol.Upstream{Ping: true}
	}
	r := gjson.GetManyBytes(data, "id", "connect", "push.channel", "push.pub.offset", "push.unsubscribe")
	if id := replyID(r[0]); id != "" {
		return protocol.Upstream{LoginOK: r[1].IsObject(), ReplyID: id}
	}
	if r[2].Type != gjson.String {
		return protocol.Upstream{}
	}
	switch {
	case r[4].IsObject():
		return protocol.Upstream{Ends: true, EndKey: r[2].Str}
	case r[3].Type == gjson.Number:
		return protocol.Upstream{Seq: protocol.Fields{Seq: r[3].Int(), HasSeq: true, Stream: r[2].Str}}
	}
	return protocol.Upstream{}
}

// replyID is a command's or reply's id, "" for none: 0 or absent is a
// push or a command that is not answered.
func replyID(r gjson.Result) string {
	if r.Type != gjson.Number || r.Int() <= 0 {
		return ""
	}
	return r.Raw
}

func isConnectReply(data []byte) bool {
	r := gjson.GetManyBytes(data, "id", "connect")
	return replyID(r[0]) != "" && r[1].IsObject()
}

// isEmptyObject reports whether data is {} (a ping or a pong), spaces
// allowed. It stops at the first byte that is neither a space nor the
// brace due, so that a publication, which it is asked about too, costs a
// byte or two.
func isEmptyObject(data []byte) bool {
	const braces = "{}"
	seen := 0 // braces read
	for _, b := range data {
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
		case seen < len(braces) && b == braces[seen]:
			seen++
		default:
			return false
		}
	}
	return seen == len(braces)
}
