package mqtt

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// pkt encodes a packet of type t with flags and body, as a client would.
func pkt(t Type, flags byte, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	out := []byte{byte(t)<<4 | flags}
	n := len(b)
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			c |= 0x80
		}
		out = append(out, c)
		if n == 0 {
			break
		}
	}
	return append(out, b...)
}

func u16(n uint16) []byte { return binary.BigEndian.AppendUint16(nil, n) }

func str(s string) []byte { return append(u16(uint16(len(s))), s...) }

func TestHeader(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		total    int
		hlen     int
		complete bool
		bad      bool
	}{
		{"empty", nil, 0, 0, false, false},
		{"type only", []byte{0x30}, 0, 0, false, false},
		{"zero", []byte{0xc0, 0x00}, 2, 2, true, false},
		{"127", []byte{0x30, 0x7f}, 129, 2, true, false},
		{"128", []byte{0x30, 0x80, 0x01}, 131, 3, true, false},
		{"16383", []byte{0x30, 0xff, 0x7f}, 16386, 3, true, false},
		{"16384", []byte{0x30, 0x80, 0x80, 0x01}, 16388, 4, true, false},
		{"2097152", []byte{0x30, 0x80, 0x80, 0x80, 0x01}, 2097157, 5, true, false},
		{"max", []byte{0x30, 0xff, 0xff, 0xff, 0x7f}, 268435455 + 5, 5, true, false},
		{"cut in the length", []byte{0x30, 0x80, 0x80}, 0, 0, false, false},
		{"five length bytes", []byte{0x30, 0x80, 0x80, 0x80, 0x80, 0x01}, 0, 0, false, true},
		{"four continued", []byte{0x30, 0x80, 0x80, 0x80, 0x80}, 0, 0, false, true},
	}
	for _, c := range cases {
		total, hlen, complete, err := header(c.data)
		if total != c.total || hlen != c.hlen || complete != c.complete || (err != nil) != c.bad {
			t.Errorf("%s: header(% x) = %d, %d, %v, %v; want %d, %d, %v, bad %v", c.name, c.data, total, hlen, complete, err, c.total, c.hlen, c.complete, c.bad)
		}
	}
}

func TestPublishID(t *testing.T) {
	cases := []struct {
		data []byte
		id   uint16
		ok   bool
	}{
		{pkt(Publish, 0, str("a/b"), []byte("x")), 0, false},        // QoS 0 has none
		{pkt(Publish, 2, str("a/b"), u16(7), []byte("x")), 7, true}, // QoS 1
		{pkt(Publish, 4|1, str("a/b"), u16(9), []byte{0}), 9, true}, // QoS 2, retained
		{pkt(Publish, 6, str("a/b"), u16(9)), 0, false},             // QoS 3 is malformed
		{pkt(Publish, 2, str("a/b"), []byte{0}), 0, false},          // cut short
		{pkt(Publish, 2|dupFlag, str(""), u16(65535)), 65535, true}, // a DUP, an empty topic (an alias)
	}
	for _, c := range cases {
		p, ok := parse(c.data)
		if !ok {
			t.Fatalf("parse(% x) failed", c.data)
		}
		if id, ok := p.publishID(); id != c.id || ok != c.ok {
			t.Errorf("publishID(% x) = %d, %v; want %d, %v", c.data, id, ok, c.id, c.ok)
		}
	}
}
