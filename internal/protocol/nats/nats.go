package nats

import (
	"bytes"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Protocol is the NATS preset (doc.go).
type Protocol struct{}

// New returns the preset.
func New() *Protocol { return &Protocol{} }

// pong answers the app's PING while the server is down. NATS over
// WebSocket travels in binary messages.
var pong = protocol.Message{Op: ws.OpBinary, Data: []byte("PONG\r\n")}

// Capabilities of the preset: it frames both directions into operations,
// shows the app one INFO, and answers its PING while the server is down.
func (p *Protocol) Capabilities() protocol.Capabilities {
	return protocol.Capabilities{
		ReadsApp: true, ReadsUpstream: true,
		Confirm:   isInfo,
		Framing:   newFramer,
		Keepalive: protocol.Keepalive{Answer: func([]byte) protocol.Message { return pong }},
	}
}

// App classifies one app operation: CONNECT is the login, SUB and UNSUB
// are keyed by their sid, PING is the keepalive. An UNSUB with a maximum
// of messages does not end its subscription yet: it is logged as it is,
// after the SUB, and replayed with it. Anything else (PUB, HPUB, PONG, an
// operation that cannot be read) is plain: the server answers a bad one
// with -ERR, as it would without tether.
func (p *Protocol) App(data []byte) protocol.App {
	op, args := operation(data)
	switch op {
	case "CONNECT":
		return protocol.App{Kind: protocol.AppLogin}
	case "PING":
		return protocol.App{Kind: protocol.AppKeepalive}
	case "SUB": // SUB <subject> [queue group] <sid>
		if len(args) == 2 || len(args) == 3 {
			return protocol.App{Kind: protocol.AppSubscribe, Key: string(args[len(args)-1]), Keyed: true}
		}
	case "UNSUB": // UNSUB <sid> [max_msgs]
		switch len(args) {
		case 1:
			return protocol.App{Kind: protocol.AppUnsubscribe, Key: string(args[0]), Keyed: true}
		case 2:
			return protocol.App{Kind: protocol.AppUnsubscribe}
		}
	}
	return protocol.App{}
}

// Upstream classifies one server operation: INFO, which every connection
// starts with, is shown to the app once; PONG answers the app's PING.
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	switch op, _ := operation(data); op {
	case "INFO":
		return protocol.Upstream{Once: true}
	case "PONG":
		return protocol.Upstream{KeepaliveReply: true}
	}
	return protocol.Upstream{}
}

// isInfo reports whether a server WebSocket message, whole, starts with
// INFO: the server greets every connection with one.
func isInfo(data []byte) bool {
	op, _ := operation(data)
	return op == "INFO"
}

// operation returns the upper-cased name of the operation data starts
// with (the protocol's names are case-insensitive) and the arguments of
// its control line; CONNECT and INFO have their JSON as arguments.
func operation(data []byte) (string, [][]byte) {
	line := data
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	args := bytes.Fields(line)
	if len(args) == 0 {
		return "", nil
	}
	return string(bytes.ToUpper(args[0])), args[1:]
}
