package wsconn_test

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// peerDeflater is a test peer's permessage-deflate compressor (RFC 7692
// §7.2.1): one flate stream, flushed after each message with the final
// 0x00 0x00 0xff 0xff removed; reset between messages without context
// takeover.
type peerDeflater struct {
	buf      bytes.Buffer
	w        *flate.Writer
	takeover bool
}

func newPeerDeflater(tb testing.TB, takeover bool) *peerDeflater {
	d := &peerDeflater{takeover: takeover}
	w, err := flate.NewWriter(&d.buf, flate.DefaultCompression)
	if err != nil {
		tb.Fatal(err)
	}
	d.w = w
	return d
}

func (d *peerDeflater) compress(tb testing.TB, p []byte) []byte {
	tb.Helper()
	d.buf.Reset()
	if !d.takeover {
		d.w.Reset(&d.buf)
	}
	if _, err := d.w.Write(p); err != nil {
		tb.Fatal(err)
	}
	if err := d.w.Flush(); err != nil {
		tb.Fatal(err)
	}
	b := d.buf.Bytes()
	if !bytes.HasSuffix(b, []byte{0, 0, 0xff, 0xff}) {
		tb.Fatalf("flush did not end with the empty stored block: % x", b[max(0, len(b)-8):])
	}
	return append([]byte(nil), b[:len(b)-4]...)
}

// compressedFrame is a server frame carrying a compressed payload: RSV1 set.
func compressedFrame(op ws.OpCode, fin bool, payload []byte) ws.Frame {
	f := ws.NewFrame(op, fin, payload)
	f.Header.Rsv = ws.Rsv(true, false, false)
	return f
}

// inflate is what a peer does with tether's compressed message.
func inflate(tb testing.TB, p []byte) []byte {
	tb.Helper()
	r := flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff})))
	out, err := io.ReadAll(r)
	if err != nil {
		tb.Fatalf("inflate tether's message: %v", err)
	}
	return out
}

// feedMessage is one message of a JSON price feed: similar messages, as a
// market data or chat upstream sends.
func feedMessage(i int) []byte {
	return fmt.Appendf(nil, `{"type":"trade","channel":"prices","symbol":"EURUSD","seq":%d,"price":1.%04d,"size":%d,"side":"buy","venue":"primary"}`,
		i, 1000+i%97, 100+i%13)
}

// TestDeflateRead: compressed messages are inflated, with the previous
// messages as dictionary when the peer keeps its context, and each on its
// own when it does not; a fragmented compressed message, with RSV1 on its
// first frame only, and uncompressed messages in between arrive whole.
func TestDeflateRead(t *testing.T) {
	for _, takeover := range []bool{true, false} {
		t.Run(fmt.Sprintf("context takeover %v", takeover), func(t *testing.T) {
			c, peer := clientSide(t, wsconn.Options{Deflate: &wsconn.Deflate{PeerNoContextTakeover: !takeover}})
			d := newPeerDeflater(t, takeover)
			ch := readLoop(t, c)
			var want []string
			for i := range 50 {
				msg := feedMessage(i)
				want = append(want, string(msg))
				writeRaw(t, peer, compressedFrame(ws.OpText, true, d.compress(t, msg)))
				if i%10 == 5 {
					plain := fmt.Sprintf(`{"type":"heartbeat","n":%d}`, i)
					want = append(want, plain)
					writeRaw(t, peer, ws.NewTextFrame([]byte(plain)))
				}
			}
			big := bytes.Repeat(feedMessage(7), 2000) // 220 KB, past the 32 KiB window
			z := d.compress(t, big)
			third := len(z) / 3
			writeRaw(t, peer,
				compressedFrame(ws.OpBinary, false, z[:third]),
				ws.NewFrame(ws.OpContinuation, false, z[third:2*third]),
				ws.NewPingFrame([]byte("mid")),
				ws.NewFrame(ws.OpContinuation, true, z[2*third:]))
			after := feedMessage(1000)
			writeRaw(t, peer, compressedFrame(ws.OpText, true, d.compress(t, after)))
			for i, w := range want {
				if m := recv(t, ch); m.err != nil || m.op != ws.OpText || string(m.p) != w {
					t.Fatalf("message %d: %v %q %v, want %q", i, m.op, m.p, m.err, w)
				}
			}
			if m := recv(t, ch); m.err != nil || m.op != ws.OpBinary || !bytes.Equal(m.p, big) {
				t.Fatalf("fragmented message: %v, %d bytes, %v; want binary, %d bytes", m.op, len(m.p), m.err, len(big))
			}
			if m := recv(t, ch); m.err != nil || string(m.p) != string(after) {
				t.Fatalf("message after the large one: %q %v, want %q", m.p, m.err, after)
			}
		})
	}
}

// TestDeflateStreamRestart: with context takeover, a message whose final
// flush hands over nothing new (an empty message; output that ends exactly
// where the 32 KiB window wraps) stops the connection's decompressor, which
// restarts from the history for the next message: messages that refer
// back across the restart still inflate right.
func TestDeflateStreamRestart(t *testing.T) {
	c, peer := clientSide(t, wsconn.Options{Deflate: &wsconn.Deflate{}})
	d := newPeerDeflater(t, true)
	ch := readLoop(t, c)
	first := []byte(strings.Repeat("abcdefghij", 3276) + "klmnopqr") // 32768 bytes: the window wraps at its end
	msgs := [][]byte{
		first,
		[]byte(strings.Repeat("abcdefghij", 20)), // back references into the first
		{},                                       // an empty message
		append([]byte("klmnopqr"), first[100:400]...),
		feedMessage(1), feedMessage(2),
	}
	for _, m := range msgs {
		writeRaw(t, peer, compressedFrame(ws.OpText, true, d.compress(t, m)))
	}
	for i, m := range msgs {
		if got := recv(t, ch); got.err != nil || !bytes.Equal(got.p, m) {
			t.Fatalf("message %d: %d bytes %v, want %d bytes %.40q", i, len(got.p), got.err, len(m), m)
		}
	}
}

// TestDeflateBomb: a message that inflates past MaxMessageBytes is closed
// with 1009 after at most MaxMessageBytes are inflated: a 256 MiB bomb of
// 250 KB costs the reader about its 1 MiB limit, not 256 MiB.
func TestDeflateBomb(t *testing.T) {
	const limit = 1 << 20
	payload := deflateBomb(t, 256)
	if len(payload) > limit {
		t.Fatalf("bomb of %d bytes does not fit the compressed limit", len(payload))
	}
	c, peer := clientSide(t, wsconn.Options{MaxMessageBytes: limit, Deflate: &wsconn.Deflate{}})
	go func() { _, _ = peer.Write(encode(t, compressedFrame(ws.OpBinary, true, payload))) }()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := c.ReadMessage()
	runtime.ReadMemStats(&after)
	pe := asProtocolError(t, err, ws.StatusMessageTooBig)
	if !strings.Contains(pe.Reason, "inflated") {
		t.Errorf("reason %q, want it to say the message was too large once inflated", pe.Reason)
	}
	expectClose(t, peer, true, ws.StatusMessageTooBig, nil)
	// The compressed payload (250 KB), the inflated limit (1 MiB) and the
	// inflater's own state, with room for the runtime: far below the bomb.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("reading the bomb allocated %d MiB, want a few (the limit is 1 MiB)", grew>>20)
	}
}

// deflateBomb is a permessage-deflate payload of mib MiB of zeros, built
// without compressing them all: after a flush, the compressor's window is
// all zeros and its state the same, so each further MiB compresses to the
// same bytes, which are repeated.
func deflateBomb(tb testing.TB, mib int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	block := func() []byte {
		start := buf.Len()
		_, _ = w.Write(zeros)
		_ = w.Flush()
		return append([]byte(nil), buf.Bytes()[start:]...)
	}
	first, second, third := block(), block(), block()
	if !bytes.Equal(second, third) {
		tb.Fatal("the compressor's blocks differ; the bomb cannot be built by repetition")
	}
	out := append(first, bytes.Repeat(second, mib-1)...)
	// Check the construction on a few MiB: it must inflate to zeros.
	probe := append(append([]byte(nil), first...), second...)
	got := inflate(tb, probe[:len(probe)-4])
	if len(got) != 2<<20 || bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
		tb.Fatalf("a 2 MiB bomb inflates to %d bytes, not all zeros", len(got))
	}
	return out[:len(out)-4] // the last flush's 0x00 0x00 0xff 0xff
}

// TestDeflateInvalid: compressed data that does not inflate is 1007; RSV1
// where the extension does not allow it (a continuation, a control frame,
// RSV2, or no extension at all) is 1002.
func TestDeflateInvalid(t *testing.T) {
	withDeflate := wsconn.Options{Deflate: &wsconn.Deflate{}}
	rsv := func(f ws.Frame, r1, r2 bool) ws.Frame {
		f.Header.Rsv = ws.Rsv(r1, r2, false)
		return f
	}
	for _, tc := range []struct {
		name   string
		opts   wsconn.Options
		frames []ws.Frame
		code   ws.StatusCode
	}{
		{"garbage", withDeflate, []ws.Frame{compressedFrame(ws.OpText, true, []byte{0xff, 0xfe, 0xfd, 0x00})}, ws.StatusInvalidFramePayloadData},
		{"RSV1 on a continuation", withDeflate, []ws.Frame{ws.NewFrame(ws.OpText, false, []byte("a")), rsv(ws.NewFrame(ws.OpContinuation, true, []byte("b")), true, false)}, ws.StatusProtocolError},
		{"RSV1 on a ping", withDeflate, []ws.Frame{rsv(ws.NewPingFrame(nil), true, false)}, ws.StatusProtocolError},
		{"RSV2", withDeflate, []ws.Frame{rsv(ws.NewTextFrame([]byte("a")), false, true)}, ws.StatusProtocolError},
		{"RSV1 without the extension", wsconn.Options{}, []ws.Frame{compressedFrame(ws.OpText, true, []byte{0x4a, 0x04, 0x00})}, ws.StatusProtocolError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := clientSide(t, tc.opts)
			writeRaw(t, peer, tc.frames...)
			_, _, err := c.ReadMessage()
			asProtocolError(t, err, tc.code)
			expectClose(t, peer, true, tc.code, nil)
		})
	}
}

// TestDeflateWrite: with Compress, a data message of CompressMinBytes or
// more goes out compressed (RSV1, masked, inflating to the message), a
// smaller one or one that does not shrink goes out as it is; without
// Compress nothing is compressed; control frames never are.
func TestDeflateWrite(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	json := bytes.Repeat(feedMessage(3), 40)
	for _, tc := range []struct {
		name       string
		compress   bool
		op         ws.OpCode
		p          []byte
		compressed bool
	}{
		{"a JSON message", true, ws.OpText, json, true},
		{"a small message", true, ws.OpText, json[:wsconn.CompressMinBytes-1], false},
		{"at the threshold", true, ws.OpBinary, bytes.Repeat([]byte("a"), wsconn.CompressMinBytes), true},
		{"incompressible", true, ws.OpBinary, random, false},
		{"compression not allowed", false, ws.OpText, json, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := clientSide(t, wsconn.Options{Deflate: &wsconn.Deflate{Compress: tc.compress}})
			mustSend(t, c, tc.op, tc.p)
			if err := c.Ping([]byte("still plain")); err != nil {
				t.Fatal(err)
			}
			f, err := readFrame(peer)
			if err != nil {
				t.Fatal(err)
			}
			if f.hdr.OpCode == ws.OpPing { // pings may go ahead of data
				if f, err = readFrame(peer); err != nil {
					t.Fatal(err)
				}
			}
			got := f.payload
			if f.hdr.Rsv == ws.Rsv(true, false, false) {
				if !tc.compressed {
					t.Fatalf("message sent compressed (%d bytes for %d), want it plain", len(f.payload), len(tc.p))
				}
				if len(f.payload) >= len(tc.p) {
					t.Errorf("compressed to %d bytes from %d", len(f.payload), len(tc.p))
				}
				got = inflate(t, f.payload)
			} else if f.hdr.Rsv != 0 || tc.compressed {
				t.Fatalf("frame RSV %03b, want compressed %v", f.hdr.Rsv, tc.compressed)
			}
			if !f.hdr.Masked || f.hdr.OpCode != tc.op || !bytes.Equal(got, tc.p) {
				t.Fatalf("frame %v masked %v carrying %d bytes, want %v, masked, the message", f.hdr.OpCode, f.hdr.Masked, len(got), tc.op)
			}
		})
	}
}

// BenchmarkSendDeflate measures Send of a JSON feed message to the
// upstream, plain and compressed (each message on its own, as tether
// sends): the CPU compressing costs per message.
func BenchmarkSendDeflate(b *testing.B) {
	msg := bytes.Repeat(feedMessage(1), 8) // 950 B
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compressed=%v", compress), func(b *testing.B) {
			d := &wsconn.Deflate{Compress: compress, PeerNoContextTakeover: true}
			srv, cli := bothSides(b, wsconn.Options{Deflate: d}, wsconn.Options{Deflate: d})
			read := countMessages(srv, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := cli.Send(ctx, ws.OpText, msg); err != nil {
					b.Fatalf("Send: %v", err)
				}
			}
			if err := <-read; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestDeflateBothSides: a wsconn client compressing talks to a wsconn
// server inflating (the server side of wsconn is tested as a peer only).
func TestDeflateBothSides(t *testing.T) {
	d := &wsconn.Deflate{Compress: true, PeerNoContextTakeover: true}
	srv, cli := bothSides(t, wsconn.Options{Deflate: d}, wsconn.Options{Deflate: d})
	ch := readLoop(t, srv)
	for i := range 20 {
		mustSend(t, cli, ws.OpText, bytes.Repeat(feedMessage(i), 3))
	}
	for i := range 20 {
		if m := recv(t, ch); m.err != nil || string(m.p) != string(bytes.Repeat(feedMessage(i), 3)) {
			t.Fatalf("message %d: %q %v", i, m.p, m.err)
		}
	}
}

// BenchmarkReadDeflate is BenchmarkReadMessage's client side for a JSON
// feed, plain and compressed with context takeover (how Node's ws and
// Python's websockets compress by default): the CPU inflating costs per
// message, and the bytes the feed takes on the wire (wire-B/msg).
func BenchmarkReadDeflate(b *testing.B) {
	const distinct = 512
	msgs := make([][]byte, distinct)
	for i := range msgs {
		msgs[i] = feedMessage(i)
	}
	for _, compressed := range []bool{false, true} {
		b.Run(fmt.Sprintf("compressed=%v", compressed), func(b *testing.B) {
			p := newRawPair(b)
			opts := wsconn.Options{Client: true}
			if compressed {
				opts.Deflate = &wsconn.Deflate{}
			}
			c := wrap(b, p.client, p.clientBR, opts)
			// The peer's stream is encoded once and replayed as often as b.N
			// needs: its first message refers to nothing before it, so each
			// replay inflates right whatever the window holds.
			var stream []byte
			d := newPeerDeflater(b, true)
			for _, m := range msgs {
				f := ws.NewTextFrame(m)
				if compressed {
					f = compressedFrame(ws.OpText, true, d.compress(b, m))
				}
				stream = append(stream, encode(b, f)...)
			}
			wrote := make(chan error, 1)
			go func() { wrote <- writeStream(p.server, stream, distinct, b.N) }()
			var raw int
			for _, m := range msgs {
				raw += len(m)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_, got, err := c.ReadMessage()
				if err != nil || len(got) != len(msgs[i%distinct]) {
					b.Fatalf("ReadMessage %d: %d bytes, %v", i, len(got), err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(stream))/distinct, "wire-B/msg")
			b.ReportMetric(float64(raw)/distinct, "json-B/msg")
			for i := b.N; i%distinct != 0; i++ { // the rest of the last replay
				if _, _, err := c.ReadMessage(); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-wrote; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// writeStream writes the first n messages of stream repeated, where stream
// holds distinct messages.
func writeStream(w net.Conn, stream []byte, distinct, n int) error {
	for n > 0 {
		if _, err := w.Write(stream); err != nil {
			return fmt.Errorf("write stream: %w", err)
		}
		n -= distinct
	}
	return nil
}
