package protocol

import (
	"bytes"
	"encoding/json"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/rules"
)

// The rules' keepalives (TETHER_APP_PING_MATCH, TETHER_APP_PONG_MESSAGE,
// TETHER_APP_KEEPALIVE_MESSAGE, TETHER_APP_KEEPALIVE_INTERVAL): an app
// whose client library pings its server and gives up when no answer comes
// (graphql-ws, STOMP heart-beats), or that counts a silent server as gone
// (subscriptions-transport-ws's ka, Action Cable's ping), would close
// itself during an outage longer than its own timeout. tether answers for
// the upstream, and beats for it, while no connection is live.

// keepalive is the rules' Capabilities.Keepalive.
func (r *ruleSet) keepalive() Keepalive {
	var k Keepalive
	if r.AppPingMatch != nil {
		pong := Message{Op: ws.OpText, Data: r.AppPongMessage}
		k.Answer = func([]byte) Message { return pong }
	}
	if r.AppKeepaliveInterval > 0 && len(r.AppKeepaliveMessage) > 0 {
		k.Every = r.AppKeepaliveInterval
		k.Beat = Message{Op: ws.OpText, Data: r.AppKeepaliveMessage}
	}
	return k
}

// pongReader tells the upstream's answer to an app keepalive
// (Upstream.KeepaliveReply) by its likeness to the pong tether answers
// with: a JSON object pong is a containment pattern ({"type":"pong"} also
// matches {"type":"pong","payload":{}}), any other pong must come byte for
// byte.
type pongReader struct {
	m     *rules.Matcher // the pong as a pattern; nil when it is not a JSON object
	exact []byte
}

func newPongReader(pong []byte) pongReader {
	if len(pong) == 0 {
		return pongReader{}
	}
	if json.Valid(pong) && bytes.HasPrefix(bytes.TrimSpace(pong), []byte{'{'}) {
		if m, err := rules.Compile(string(pong)); err == nil {
			return pongReader{m: m}
		}
	}
	return pongReader{exact: pong}
}

// answers reports whether data, read into v by the upstream scan, is the
// upstream's pong; sm is the pong pattern on that scan.
func (p *pongReader) answers(data []byte, sm *scanMatcher, v *ruleValues) bool {
	if p.m != nil {
		return sm.match(data, v)
	}
	return p.exact != nil && bytes.Equal(data, p.exact)
}
