package stomp

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Protocol is the STOMP preset (doc.go).
type Protocol struct{}

// New returns the preset.
func New() *Protocol { return &Protocol{} }

// heartbeat is what tether sends the app as its broker's heart-beat, and
// answers the app's with while the broker is down: one EOL (STOMP 1.2
// "Heart-beating").
var heartbeat = protocol.Message{Op: ws.OpText, Data: []byte{'\n'}}

// Capabilities of the preset: it frames both directions, awaits CONNECTED,
// keeps acknowledged sends (a SEND with a receipt header) until their
// RECEIPT, and sends the app a heart-beat whenever it has had nothing for
// the negotiated interval: while the broker is down, and while it is live
// but silent, as RabbitMQ is when the bytes of its WebSocket pongs to
// tether's pings count as its heart-beats (they never reach the app).
func (p *Protocol) Capabilities() protocol.Capabilities {
	return protocol.Capabilities{
		ReadsApp: true, ReadsUpstream: true,
		AwaitLogin: true,
		Acks:       true,
		Confirm:    isConnected,
		Framing:    newFramer,
		Keepalive: protocol.Keepalive{
			Answer:    func([]byte) protocol.Message { return heartbeat },
			Beat:      heartbeat,
			Negotiate: negotiate,
			Idle:      true,
		},
	}
}

// App classifies one app frame, or a run of heart-beat EOLs. A frame that
// cannot be read, or lacks the header its command needs, is plain: the
// broker answers it with an ERROR, as it would without tether.
func (p *Protocol) App(data []byte) protocol.App {
	f, ok := parse(data)
	if !ok {
		if isHeartbeat(data) {
			return protocol.App{Kind: protocol.AppKeepalive}
		}
		return protocol.App{}
	}
	switch f.command {
	case "CONNECT", "STOMP":
		return protocol.App{Kind: protocol.AppLogin}
	case "SUBSCRIBE", "UNSUBSCRIBE":
		id, ok := f.header("id")
		if !ok {
			return protocol.App{}
		}
		kind := protocol.AppSubscribe
		if f.command == "UNSUBSCRIBE" {
			kind = protocol.AppUnsubscribe
		}
		receipt, _ := f.header("receipt")
		return protocol.App{Kind: kind, Key: id, Keyed: true, ReplyID: receipt}
	case "SEND":
		receipt, _ := f.header("receipt")
		return protocol.App{AckID: receipt}
	case "ACK", "NACK":
		// STOMP 1.2 names the message by id (the MESSAGE's ack header),
		// 1.1 by message-id.
		id, ok := f.header("id")
		if !ok {
			id, _ = f.header("message-id")
		}
		return protocol.App{DeliveryID: id}
	}
	return protocol.App{}
}

// Upstream classifies one broker frame: CONNECTED answers the login, a
// RECEIPT the request whose receipt header it names (and acknowledges a
// SEND that asked for it), and a MESSAGE carries the id the app settles it
// by (its ack header, or message-id for STOMP 1.1).
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	f, ok := parse(data)
	if !ok {
		return protocol.Upstream{}
	}
	switch f.command {
	case "CONNECTED":
		return protocol.Upstream{LoginOK: true}
	case "RECEIPT":
		if id, ok := f.header("receipt-id"); ok && id != "" {
			return protocol.Upstream{ReplyID: id, Ack: true, AckID: id}
		}
	case "MESSAGE":
		id, ok := f.header("ack")
		if !ok {
			id, _ = f.header("message-id")
		}
		return protocol.Upstream{DeliveryID: id}
	}
	return protocol.Upstream{}
}

// isConnected reports whether a broker WebSocket message, whole, starts
// with a CONNECTED frame: the broker accepted the login, it is serving.
func isConnected(data []byte) bool {
	n, _ := eols(data)
	f, ok := parse(data[n:])
	return ok && f.command == "CONNECTED"
}

// negotiate returns the longest the app goes without a byte from tether,
// from the heart-beat headers of the app's CONNECT (cx,cy: the app sends
// every cx ms, wants a beat every cy ms) and of the broker's CONNECTED
// (sx,sy): the broker beats every max(sx, cy) when neither is 0 (STOMP 1.2
// "Heart-beating"), and so does tether whenever the app has had nothing
// for that long (Keepalive.Idle). 0: the app expects no heart-beats.
func negotiate(login, answer []byte) time.Duration {
	_, cy := heartbeats(login)
	sx, _ := heartbeats(answer)
	if cy == 0 || sx == 0 {
		return 0
	}
	return time.Duration(max(sx, cy)) * time.Millisecond
}

// heartbeats reads a frame's heart-beat header, 0,0 when it has none or
// cannot be read (STOMP 1.2: "heart-beat:0,0" is the default).
func heartbeats(data []byte) (x, y int) {
	f, ok := parse(data)
	if !ok {
		return 0, 0
	}
	v, _ := f.header("heart-beat")
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return 0, 0
	}
	x, errX := strconv.Atoi(strings.TrimSpace(a))
	y, errY := strconv.Atoi(strings.TrimSpace(b))
	if errX != nil || errY != nil || x < 0 || y < 0 {
		return 0, 0
	}
	return x, y
}

// isHeartbeat reports whether data is EOLs only.
func isHeartbeat(data []byte) bool {
	n, done := eols(data)
	return done && n == len(data) && n > 0
}

// frame is the command and headers of one frame, as parse read them.
type frame struct {
	command string
	headers []byte // the header lines, each ending in EOL
}

// parse reads the command and the header block of one frame (data as the
// Framer returned it). ok is false when data is no frame: EOLs only, or a
// command line without the blank line that ends the headers.
func parse(data []byte) (frame, bool) {
	i := bytes.IndexByte(data, '\n')
	if i <= 0 {
		return frame{}, false
	}
	cmd := bytes.TrimSuffix(data[:i], []byte{'\r'})
	if len(cmd) == 0 || bytes.IndexByte(cmd, 0) >= 0 {
		return frame{}, false
	}
	rest := data[i+1:]
	end := headerBlockEnd(rest)
	if end < 0 {
		return frame{}, false
	}
	return frame{command: string(cmd), headers: rest[:end]}, true
}

// headerBlockEnd returns the length of the header lines rest starts with,
// up to the blank line after them; -1 when there is none before a NUL.
func headerBlockEnd(rest []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(rest[i:], '\n')
		if j < 0 || bytes.IndexByte(rest[i:i+j], 0) >= 0 {
			return -1
		}
		if j == 0 || j == 1 && rest[i] == '\r' {
			return i
		}
		i += j + 1
	}
}

// header returns the value of the first header named name (STOMP 1.2
// "Repeated Header Entries"), unescaped except in CONNECT and CONNECTED
// frames ("Value Encoding").
func (f frame) header(name string) (string, bool) {
	h := f.headers
	for len(h) > 0 {
		i := bytes.IndexByte(h, '\n')
		line := bytes.TrimSuffix(h[:i], []byte{'\r'})
		h = h[i+1:]
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok || string(k) != name {
			continue
		}
		if f.command == "CONNECT" || f.command == "CONNECTED" {
			return string(v), true
		}
		return unescape(v), true
	}
	return "", false
}

// unescape decodes STOMP 1.2's header escapes; an undefined escape is kept
// as it is (the broker refuses the frame).
func unescape(v []byte) string {
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v)
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		switch v[i+1] {
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 'c':
			b.WriteByte(':')
		case '\\':
			b.WriteByte('\\')
		default:
			b.WriteByte(v[i])
			continue
		}
		i++
	}
	return b.String()
}
