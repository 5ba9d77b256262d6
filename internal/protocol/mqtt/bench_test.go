package mqtt

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"
)

// BenchmarkFramer: a 1 KiB QoS 1 PUBLISH framed whole in one message, cut
// in three as mqtt.js writes it (header, topic, payload), and 16 packets
// sharing one message; then the classification of each.
func BenchmarkFramer(b *testing.B) {
	pub := pkt(Publish, 2, str("sensors/room/1"), u16(7), bytes.Repeat([]byte("x"), 1024))
	cases := []struct {
		name string
		msgs [][]byte
	}{
		{"whole", [][]byte{pub}},
		{"cut in three", [][]byte{pub[:3], pub[3:21], pub[21:]}},
		{"16 in one", [][]byte{bytes.Repeat(pub, 16)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := NewFramer(1 << 20)
			n := 0
			for _, m := range c.msgs {
				n += len(m)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				for _, m := range c.msgs {
					if _, err := f.Split(ws.OpBinary, m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	b.Run("classify", func(b *testing.B) {
		p := New(Options{})
		b.ReportAllocs()
		for b.Loop() {
			if p.App(pub).AckID == "" {
				b.Fatal("not acknowledged")
			}
		}
	})
}
