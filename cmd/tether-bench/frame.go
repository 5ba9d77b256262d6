package main

import (
	"encoding/binary"

	"github.com/gobwas/ws"
)

// appendHeader appends the header of a final, unmasked frame (a server's frame,
// RFC 6455 §5.2) carrying n bytes.
func appendHeader(b []byte, op ws.OpCode, n int) []byte {
	b = append(b, 0x80|byte(op))
	switch {
	case n <= 125:
		return append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126)
		return binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		return binary.BigEndian.AppendUint64(b, uint64(n))
	}
}

// headerLen is the length of appendHeader's header for n bytes.
func headerLen(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 0xffff:
		return 4
	default:
		return 10
	}
}

// sinkMask is the masking key of the sink's close frame. A fixed key is enough
// for a benchmark client on loopback: masking (§5.3) protects intermediaries
// from attacker-chosen bytes, which a benchmark does not send.
var sinkMask = [4]byte{0x5a, 0x17, 0xc3, 0x81}

// clientCloseFrame is the sink's masked close frame with status 1000.
func clientCloseFrame() []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(ws.StatusNormalClosure))
	f := []byte{0x80 | byte(ws.OpClose), 0x80 | byte(len(body))}
	f = append(f, sinkMask[:]...)
	start := len(f)
	f = append(f, body...)
	ws.Cipher(f[start:], sinkMask, 0)
	return f
}
