package mqtt

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Subprotocol is the WebSocket subprotocol an MQTT client offers (MQTT 5
// §6: "mqtt"); tether passes the app's offer on and keeps the broker's
// choice.
const Subprotocol = "mqtt"

// Options configure the preset.
type Options struct {
	// MaxPacket bounds a packet's size, fixed header included
	// (TETHER_MAX_MESSAGE_BYTES); 0 is MQTT's own limit.
	MaxPacket int
}

// Protocol is the mqtt preset (protocol.Protocol). It keeps no state and is
// safe for concurrent use.
type Protocol struct {
	caps protocol.Capabilities
}

// New returns the mqtt preset.
func New(o Options) *Protocol {
	return &Protocol{caps: protocol.Capabilities{
		ReadsApp:      true,
		ReadsUpstream: true,
		AwaitLogin:    true,
		AwaitReplies:  true,
		Acks:          true,
		Confirm:       connackOK,
		Framing:       func() protocol.Framer { return NewFramer(o.MaxPacket) },
		Keepalive:     protocol.Keepalive{Answer: pingresp},
		Resend:        resend,
	}}
}

// Capabilities: framed, the login awaited, acknowledged publishes, PINGREQ
// answered while down, unacknowledged PUBLISHes re-sent with DUP.
func (p *Protocol) Capabilities() protocol.Capabilities { return p.caps }

// The flows acks and replies are named by (idKey): a PUBLISH of QoS 1 or 2
// is acknowledged by its PUBACK or PUBREC, a PUBREL by its PUBCOMP, and a
// SUBSCRIBE and an UNSUBSCRIBE answered by their SUBACK and UNSUBACK.
const (
	flowPublish     = 'p'
	flowRelease     = 'r'
	flowSubscribe   = 's'
	flowUnsubscribe = 'u'
)

// App classifies one packet from the app: CONNECT is the login, a PINGREQ
// the keepalive, a SUBSCRIBE or UNSUBSCRIBE a subscription keyed by its
// topic filter, a PUBLISH of QoS 1 or 2 and a PUBREL acknowledged sends.
func (p *Protocol) App(data []byte) protocol.App {
	pk, ok := parse(data)
	if !ok {
		return protocol.App{}
	}
	switch pk.typ {
	case Connect:
		return protocol.App{Kind: protocol.AppLogin}
	case Pingreq:
		return protocol.App{Kind: protocol.AppKeepalive}
	case Publish:
		if id, ok := pk.publishID(); ok {
			return protocol.App{AckID: idKey(flowPublish, id)}
		}
	case Pubrel:
		if id, ok := pk.id(); ok {
			return protocol.App{AckID: idKey(flowRelease, id)}
		}
	case Subscribe:
		return subscription(pk, protocol.AppSubscribe, flowSubscribe)
	case Unsubscribe:
		return subscription(pk, protocol.AppUnsubscribe, flowUnsubscribe)
	}
	return protocol.App{}
}

// subscription classifies a SUBSCRIBE or UNSUBSCRIBE. Its reply (SUBACK,
// UNSUBACK) carries its packet identifier. A packet of one topic filter is
// keyed by it, so an UNSUBSCRIBE cancels its SUBSCRIBE and a repeated
// SUBSCRIBE replaces the earlier one; a packet of several is kept as the
// app sent it, in order (see doc.go).
func subscription(pk packet, kind protocol.AppKind, flow byte) protocol.App {
	id, ok := pk.id()
	if !ok {
		return protocol.App{}
	}
	a := protocol.App{Kind: kind, ReplyID: idKey(flow, id)}
	if filters := topicFilters(pk.body[2:], kind == protocol.AppSubscribe); len(filters) == 1 {
		a.Key, a.Keyed = filters[0], true
	}
	return a
}

// Upstream classifies one packet from the broker: a CONNACK answers the
// login, PUBACK and PUBREC acknowledge a PUBLISH, PUBCOMP a
// PUBREL, SUBACK and UNSUBACK reply to their request, PINGRESP to the
// app's PINGREQ.
func (p *Protocol) Upstream(data []byte) protocol.Upstream {
	pk, ok := parse(data)
	if !ok {
		return protocol.Upstream{}
	}
	if pk.typ == Connack {
		// Refused or not, it answers the CONNECT: the first reaches the
		// app, whose client library ends on a refusal; a later one is
		// hidden (the app has its CONNACK), and the broker closes the
		// connection after a refusal, so tether reconnects.
		return protocol.Upstream{LoginOK: len(pk.body) >= 2}
	}
	if pk.typ == Pingresp {
		return protocol.Upstream{KeepaliveReply: true}
	}
	id, ok := pk.id()
	if !ok {
		return protocol.Upstream{}
	}
	switch pk.typ {
	case Puback, Pubrec:
		return protocol.Upstream{Ack: true, AckID: idKey(flowPublish, id)}
	case Pubcomp:
		return protocol.Upstream{Ack: true, AckID: idKey(flowRelease, id)}
	case Suback:
		return protocol.Upstream{ReplyID: idKey(flowSubscribe, id)}
	case Unsuback:
		return protocol.Upstream{ReplyID: idKey(flowUnsubscribe, id)}
	}
	return protocol.Upstream{}
}

// connackSuccess: a CONNACK whose return code (3.1.1 §3.2.2.3) or reason
// code (5 §3.2.2.2) is 0, the only code of an accepted connection.
func connackSuccess(pk packet) bool { return len(pk.body) >= 2 && pk.body[1] == 0 }

// connackOK is Capabilities.Confirm: the WebSocket message starts with a
// successful CONNACK. It reads the first packet only (a broker may send
// more in the same message).
func connackOK(data []byte) bool {
	total, _, complete, err := header(data)
	if err != nil || !complete || total > len(data) {
		return false
	}
	pk, ok := parse(data[:total])
	return ok && pk.typ == Connack && connackSuccess(pk)
}

// pingresp is tether's answer to a PINGREQ while the broker is down: the
// client library closes its connection when none comes within its
// keepalive, and half again (MQTT 5 §3.1.2.10).
func pingresp([]byte) protocol.Message {
	return protocol.Message{Op: ws.OpBinary, Data: []byte{byte(Pingresp) << 4, 0}}
}

// resend sets DUP on a PUBLISH re-sent on a new connection (MQTT 5
// §3.3.1.1, 3.1.1 §4.4: "the Client MUST re-send any unacknowledged
// PUBLISH packets (where QoS > 0) ... setting their DUP flag to 1"); a
// PUBREL is re-sent as it was.
func resend(data []byte) []byte {
	if len(data) == 0 || Type(data[0]>>4) != Publish || data[0]&dupFlag != 0 {
		return data
	}
	out := slices.Clone(data)
	out[0] |= dupFlag
	return out
}

// topicFilters returns the topic filters of a SUBSCRIBE (withOptions: each
// followed by its options byte) or UNSUBSCRIBE payload, after the packet
// identifier, nil when it cannot be read. The payload is read both as MQTT
// 3.1.1 (the filters right away) and MQTT 5 (a property list first): a
// classifier sees one packet, not the CONNECT that said the version. The
// readings disagree only on packets that are malformed in one of the two
// versions (doc.go); when both read, they agree on the filters or the
// packet is left unkeyed.
func topicFilters(payload []byte, withOptions bool) []string {
	v3, ok3 := readFilters(payload, withOptions)
	var v5 []string
	ok5 := false
	if rest, ok := skipProperties(payload); ok {
		v5, ok5 = readFilters(rest, withOptions)
	}
	switch {
	case ok3 && ok5:
		if slices.Equal(v3, v5) {
			return v3
		}
		return nil
	case ok3:
		return v3
	case ok5:
		return v5
	}
	return nil
}

// readFilters reads a list of length-prefixed UTF-8 topic filters, each
// followed by an options byte when withOptions, to the payload's end.
func readFilters(b []byte, withOptions bool) ([]string, bool) {
	var out []string
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(b))
		if n == 0 || len(b) < 2+n || !utf8.Valid(b[2:2+n]) || bytes.IndexByte(b[2:2+n], 0) >= 0 {
			return nil, false
		}
		out = append(out, string(b[2:2+n]))
		b = b[2+n:]
		if withOptions {
			// 3.1.1: QoS in bits 0-1, the rest reserved; 5: QoS, no local,
			// retain as published, retain handling (≤ 2), bits 6-7 reserved.
			if len(b) < 1 || b[0]&0xc0 != 0 || b[0]&3 == 3 || b[0]>>4&3 == 3 {
				return nil, false
			}
			b = b[1:]
		}
	}
	return out, len(out) > 0
}

// skipProperties skips an MQTT 5 property list (§2.2.2: a variable byte
// integer length, then the properties) and returns what follows.
func skipProperties(b []byte) ([]byte, bool) {
	n, shift := 0, 0
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return nil, false
		}
		n |= int(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			if len(b) < i+1+n {
				return nil, false
			}
			return b[i+1+n:], true
		}
		shift += 7
	}
	return nil, false
}

var _ protocol.Protocol = (*Protocol)(nil)
