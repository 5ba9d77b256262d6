package mqtt

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gobwas/ws"
)

// stream is a few packets of both directions, as mqtt.js and mosquitto send
// them.
func stream() [][]byte {
	big := bytes.Repeat([]byte("p"), 300) // a two-byte remaining length
	return [][]byte{
		pkt(Connect, 0, str("MQTT"), []byte{5, 2}, u16(2), []byte{0}, str("app")),
		pkt(Connack, 0, []byte{0, 0, 0}),
		pkt(Subscribe, 2, u16(1), []byte{0}, str("a/#"), []byte{1}),
		pkt(Pingreq, 0),
		pkt(Publish, 2, str("a/b"), u16(2), []byte{0}, big),
		pkt(Publish, 0, str("a/c"), []byte{0}),
		pkt(Pingresp, 0),
	}
}

func splitAll(t *testing.T, f *Framer, msgs ...[]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, m := range msgs {
		got, err := f.Split(ws.OpBinary, m)
		if err != nil {
			t.Fatalf("Split(% x): %v", m, err)
		}
		for _, p := range got {
			out = append(out, bytes.Clone(p)) // valid until the next call only
		}
	}
	return out
}

// Packets come out whole and in order however the stream is cut: all in
// one message, one per message, a byte per message, at random places.
func TestFramerSplits(t *testing.T) {
	want := stream()
	all := bytes.Join(want, nil)
	bytewise := make([][]byte, len(all))
	for i := range all {
		bytewise[i] = all[i : i+1]
	}
	r := rand.New(rand.NewPCG(1, 2))
	var random [][]byte
	for rest := all; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(40))
		random, rest = append(random, rest[:n]), rest[n:]
	}
	for name, msgs := range map[string][][]byte{"joined": {all}, "one per message": want, "bytewise": bytewise, "random": random} {
		got := splitAll(t, NewFramer(0), msgs...)
		if len(got) != len(want) {
			t.Fatalf("%s: %d packets, want %d", name, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: packet %d = % x, want % x", name, i, got[i], want[i])
			}
		}
	}
}

// The packets of one call stay valid while the rest of a packet is kept.
func TestFramerKeepsPacketsOfTheCall(t *testing.T) {
	ps := stream()
	f := NewFramer(0)
	if got := splitAll(t, f, ps[0][:3]); len(got) != 0 {
		t.Fatalf("%d packets from a cut CONNECT", len(got))
	}
	rest := append(append(bytes.Clone(ps[0][3:]), ps[1]...), ps[2][:4]...)
	got, err := f.Split(ws.OpBinary, rest)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], ps[0]) || !bytes.Equal(got[1], ps[1]) {
		t.Fatalf("Split = % x, %v", got, err)
	}
	if got := splitAll(t, f, ps[2][4:]); len(got) != 1 || !bytes.Equal(got[0], ps[2]) {
		t.Fatalf("the SUBSCRIBE came out as % x", got)
	}
}

// What cannot be framed is an error naming why; the packets before it still
// come out, and the Framer keeps nothing of it.
func TestFramerErrors(t *testing.T) {
	ps := stream()
	cases := []struct {
		name string
		op   ws.OpCode
		data []byte
		max  int
		good int
	}{
		{"text", ws.OpText, ps[3], 0, 0},
		{"malformed length", ws.OpBinary, append(bytes.Clone(ps[3]), 0x30, 0x80, 0x80, 0x80, 0x80, 0x01), 0, 1},
		{"over the bound", ws.OpBinary, append(bytes.Clone(ps[3]), ps[4]...), 100, 1},
		{"over the bound, header only", ws.OpBinary, []byte{0x30, 0x80, 0x08}, 1000, 0},
	}
	for _, c := range cases {
		f := NewFramer(c.max)
		got, err := f.Split(c.op, c.data)
		var fe *FrameError
		if !errors.As(err, &fe) || len(got) != c.good {
			t.Errorf("%s: Split = %d packets, %v; want %d and a FrameError", c.name, len(got), err, c.good)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		if got := splitAll(t, f, ps[3]); len(got) != 1 || !bytes.Equal(got[0], ps[3]) {
			t.Errorf("%s: after the error, a PINGREQ came out as % x", c.name, got)
		}
	}
	// At the bound exactly is fine.
	if got := splitAll(t, NewFramer(len(ps[4])), ps[4]); len(got) != 1 {
		t.Errorf("a packet of exactly the bound: %d packets", len(got))
	}
}

// FuzzFramer feeds arbitrary bytes, cut at arbitrary places, and checks the
// packets against the same bytes framed in one message: the same packets or
// the same error, each packet exactly one whole packet within the bound,
// together a prefix of the input.
func FuzzFramer(f *testing.F) {
	all := bytes.Join(stream(), nil)
	f.Add(all, uint64(1), 0)
	f.Add(all, uint64(7), 64)
	f.Add([]byte{0x30, 0x80, 0x80, 0x80, 0x80, 0x01}, uint64(3), 0)
	f.Add([]byte{0xc0, 0x00, 0xd0}, uint64(0), 2)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, max int) {
		max %= 1 << 16
		whole, wholeErr := NewFramer(max).Split(ws.OpBinary, data)
		r := rand.New(rand.NewPCG(seed, seed>>1))
		fr := NewFramer(max)
		var got [][]byte
		var err error
		for rest := data; len(rest) > 0 && err == nil; {
			n := min(len(rest), 1+r.IntN(16))
			var ps [][]byte
			ps, err = fr.Split(ws.OpBinary, rest[:n])
			rest = rest[n:]
			for _, p := range ps {
				got = append(got, bytes.Clone(p))
			}
		}
		if (err != nil) != (wholeErr != nil) || len(got) != len(whole) {
			t.Fatalf("cut: %d packets, %v; whole: %d packets, %v", len(got), err, len(whole), wholeErr)
		}
		joined := bytes.Join(got, nil)
		if !bytes.HasPrefix(data, joined) {
			t.Fatal("packets are not a prefix of the input")
		}
		for i, p := range got {
			if !bytes.Equal(p, whole[i]) {
				t.Fatalf("packet %d differs: % x vs % x", i, p, whole[i])
			}
			if _, ok := parse(p); !ok || max > 0 && len(p) > max {
				t.Fatalf("packet %d (% x) is not one packet within %d bytes", i, p, max)
			}
		}
	})
}
