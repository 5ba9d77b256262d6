package mqtt

import (
	"fmt"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Framer splits one direction's WebSocket messages into MQTT control
// packets. MQTT over WebSocket sends a byte stream in binary messages: "a
// single WebSocket data frame can contain multiple or partial MQTT Control
// Packets" (MQTT 5 §6, MQTT 3.1.1 §6), and a client library writes a
// packet's parts as they come (mqtt.js sends the fixed header, the topic
// and the payload of a PUBLISH in separate messages). Each packet comes
// out whole, once its last byte arrived.
//
// The bytes of a packet not yet complete are kept, bounded by max: a
// packet longer than max is an error, as are a text message (MQTT 5 §6:
// binary frames only) and a malformed remaining length. After an error
// the Framer holds nothing; its owner closes the app, or starts a new
// Framer with the next upstream connection.
type Framer struct {
	max  int
	buf  []byte   // bytes of a packet not yet complete, and the packets of the last call
	used int      // bytes of buf handed out by the last call
	out  [][]byte // the packets of the last call
}

// NewFramer returns a Framer for packets of at most max bytes (fixed
// header included); max <= 0 is unbounded up to MQTT's own limit of 256 MB.
func NewFramer(max int) *Framer { return &Framer{max: max} }

// Split returns the packets data completes (protocol.Framer).
func (f *Framer) Split(op ws.OpCode, data []byte) ([][]byte, error) {
	if op != ws.OpBinary {
		f.reset()
		return nil, frameErrorf("%s message: MQTT over WebSocket is sent in binary messages (MQTT 5 §6)", opName(op))
	}
	src := data
	if f.buf = f.buf[:copy(f.buf, f.buf[f.used:])]; len(f.buf) > 0 {
		f.buf = append(f.buf, data...)
		src = f.buf
	}
	f.used = 0
	out := f.out[:0]
	at := 0
	for at < len(src) {
		total, _, complete, err := header(src[at:])
		if err == nil && complete && f.max > 0 && total > f.max {
			err = fmt.Errorf("%s packet of %d bytes, more than the %d allowed (TETHER_MAX_MESSAGE_BYTES)", Type(src[at]>>4), total, f.max)
		}
		if err != nil {
			f.reset()
			return out, &FrameError{Reason: err.Error()}
		}
		if !complete || len(src)-at < total {
			break
		}
		out = append(out, src[at:at+total:at+total])
		at += total
	}
	f.keep(src, at)
	f.out = out
	return out, nil
}

// keep holds the incomplete rest of src, from at, for the next call. When
// src is buf, the packets handed out stay where they are until then.
func (f *Framer) keep(src []byte, at int) {
	if len(f.buf) > 0 { // src is buf
		f.used = at
		return
	}
	f.buf = append(f.buf[:0], src[at:]...)
}

func (f *Framer) reset() {
	f.buf, f.used = f.buf[:0], 0
}

func opName(op ws.OpCode) string {
	if op == ws.OpText {
		return "text"
	}
	return "non-data"
}

var _ protocol.Framer = (*Framer)(nil)
