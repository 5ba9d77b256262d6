package mqtt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// Type is an MQTT control packet type, the high nibble of the fixed
// header's first byte (MQTT 3.1.1 §2.2.1, MQTT 5 §2.1.2).
type Type uint8

// The control packet types.
const (
	Connect     Type = 1
	Connack     Type = 2
	Publish     Type = 3
	Puback      Type = 4
	Pubrec      Type = 5
	Pubrel      Type = 6
	Pubcomp     Type = 7
	Subscribe   Type = 8
	Suback      Type = 9
	Unsubscribe Type = 10
	Unsuback    Type = 11
	Pingreq     Type = 12
	Pingresp    Type = 13
	Disconnect  Type = 14
	Auth        Type = 15
)

var typeNames = [...]string{"reserved", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
	"SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH"}

// String returns the packet type's name as the specifications spell it.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// dupFlag is the DUP bit of a PUBLISH's fixed header (§3.3.1.1): set on a
// re-delivery of a packet the receiver may have seen.
const dupFlag = 0x08

// errMalformedLength: a remaining length of more than four bytes (§2.2.3).
var errMalformedLength = errors.New("remaining length longer than 4 bytes")

// header reads the fixed header at the start of data: the packet's total
// length (fixed header included) and the fixed header's length. complete
// is false while data holds too little to tell; err is set when it never
// will (a malformed remaining length).
func header(data []byte) (total, hlen int, complete bool, err error) {
	n, shift := 0, 0
	for i := 1; i < len(data); i++ {
		if i > 4 {
			return 0, 0, false, errMalformedLength
		}
		b := data[i]
		n |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return 1 + i + n, 1 + i, true, nil
		}
		shift += 7
	}
	if len(data) > 4 {
		return 0, 0, false, errMalformedLength
	}
	return 0, 0, false, nil
}

// packet is one whole control packet: its type, flags and body (the
// variable header and payload, after the fixed header).
type packet struct {
	typ   Type
	flags byte
	body  []byte
}

// parse reads one whole packet, as a Framer delivers it. ok is false for
// bytes that are not exactly one packet.
func parse(data []byte) (p packet, ok bool) {
	total, hlen, complete, err := header(data)
	if !complete || err != nil || total != len(data) {
		return packet{}, false
	}
	return packet{typ: Type(data[0] >> 4), flags: data[0] & 0x0f, body: data[hlen:]}, true
}

// id returns the packet identifier the body starts with (PUBACK, PUBREC,
// PUBREL, PUBCOMP, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK).
func (p packet) id() (uint16, bool) {
	if len(p.body) < 2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(p.body), true
}

// qos is a PUBLISH's quality of service (§3.3.1.2); 3 is malformed.
func (p packet) qos() byte { return p.flags >> 1 & 3 }

// publishID returns the packet identifier of a PUBLISH of QoS 1 or 2,
// after its topic name (§3.3.2); ok is false at QoS 0 or when it does not
// fit.
func (p packet) publishID() (uint16, bool) {
	if q := p.qos(); q == 0 || q == 3 || len(p.body) < 2 {
		return 0, false
	}
	at := 2 + int(binary.BigEndian.Uint16(p.body))
	if len(p.body) < at+2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(p.body[at:]), true
}

// idKey is how acks and replies name a packet identifier: the flow's
// letter and the number, so a PUBACK never matches a SUBACK of the same id.
func idKey(flow byte, id uint16) string {
	return string(flow) + strconv.Itoa(int(id))
}

// FrameError says why bytes are not MQTT packets over WebSocket.
type FrameError struct {
	Reason string
}

func (e *FrameError) Error() string { return "mqtt: " + e.Reason }

func frameErrorf(format string, args ...any) error {
	return &FrameError{Reason: fmt.Sprintf(format, args...)}
}
