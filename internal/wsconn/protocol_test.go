package wsconn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// closeWait is short so tests that wait for the closing handshake stay fast;
// bounds on Done are derived from it.
const closeWait = 200 * time.Millisecond

func TestMaxMessageBytes(t *testing.T) {
	const limit = 1024
	tests := []struct {
		name   string
		frames []ws.Frame
		tooBig bool
	}{
		{"single frame at the limit", []ws.Frame{
			clientFrame(ws.OpBinary, true, pattern(0, limit)),
		}, false},
		{"single frame over the limit", []ws.Frame{
			clientFrame(ws.OpBinary, true, pattern(0, limit+1)),
		}, true},
		{"fragments at the limit", []ws.Frame{
			clientFrame(ws.OpText, false, pattern(0, 600)),
			clientFrame(ws.OpContinuation, true, pattern(1, limit-600)),
		}, false},
		{"fragments over the limit", []ws.Frame{
			clientFrame(ws.OpText, false, pattern(0, 600)),
			clientFrame(ws.OpContinuation, false, pattern(1, 400)),
			clientFrame(ws.OpContinuation, true, pattern(2, 25)),
		}, true},
		// Control frames are not part of the message: a ping in the middle of a
		// message that is at the limit must not count against it.
		{"ping inside a message at the limit", []ws.Frame{
			clientFrame(ws.OpText, false, pattern(0, limit-10)),
			clientFrame(ws.OpPing, true, pattern(1, 100)),
			clientFrame(ws.OpContinuation, true, pattern(2, 10)),
		}, false},
		// Empty fragments without end cost a byte each: they reach the limit.
		{"empty fragments without end", emptyFragments(limit + 1), true},
		// A peer declaring a huge length is stopped at the header, before it has
		// sent (or tether has allocated) anything.
		{"declared 1 GiB", []ws.Frame{hugeHeaderOnly()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{MaxMessageBytes: limit, CloseWait: closeWait})
			writeRaw(t, raw, tt.frames...)
			op, p, err := srv.ReadMessage()
			if !tt.tooBig {
				if err != nil || len(p) != limit || op != tt.frames[0].Header.OpCode {
					t.Fatalf("got op %v, %d bytes, err %v; want the whole %d-byte message", op, len(p), err, limit)
				}
				return
			}
			asProtocolError(t, err, ws.StatusMessageTooBig)
			expectClose(t, raw, false, ws.StatusMessageTooBig, nil)
			waitDone(t, srv, testTimeout)
		})
	}
}

// emptyFragments is the start of a message in n empty frames, not final.
func emptyFragments(n int) []ws.Frame {
	frames := []ws.Frame{clientFrame(ws.OpText, false, nil)}
	for range n - 1 {
		frames = append(frames, clientFrame(ws.OpContinuation, false, nil))
	}
	return frames
}

// hugeHeaderOnly is a frame whose header declares 1 GiB and whose payload is
// never sent.
func hugeHeaderOnly() ws.Frame {
	f := clientFrame(ws.OpBinary, true, nil)
	f.Header.Length = 1 << 30
	return f
}

func TestDefaultMaxMessageBytes(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	f := clientFrame(ws.OpBinary, true, nil)
	f.Header.Length = wsconn.DefaultMaxMessageBytes + 1
	writeRaw(t, raw, f)
	_, _, err := srv.ReadMessage()
	asProtocolError(t, err, ws.StatusMessageTooBig)
	expectClose(t, raw, false, ws.StatusMessageTooBig, nil)
}

// Each case puts frames on the wire that break RFC 6455; the server must fail the
// connection with the right close code, send that close frame, keep returning the
// same error, and finish (Done) without waiting for the peer.
func TestProtocolViolations(t *testing.T) {
	text := func(s string) ws.Frame { return clientFrame(ws.OpText, true, []byte(s)) }
	withRsv := func(f ws.Frame, rsv byte) ws.Frame { f.Header.Rsv = rsv; return f }
	tests := []struct {
		name   string
		frames []ws.Frame
		want   ws.StatusCode
	}{
		{"invalid UTF-8 text", []ws.Frame{text("bad \xff byte")}, ws.StatusInvalidFramePayloadData},
		{"truncated rune at end of fragmented text", []ws.Frame{
			clientFrame(ws.OpText, false, []byte("ok")),
			clientFrame(ws.OpContinuation, true, []byte("\xe2\x82")),
		}, ws.StatusInvalidFramePayloadData},
		{"rsv1 without extension", []ws.Frame{withRsv(text("x"), 4)}, ws.StatusProtocolError},
		{"rsv3 on a ping", []ws.Frame{withRsv(clientFrame(ws.OpPing, true, nil), 1)}, ws.StatusProtocolError},
		{"continuation without start", []ws.Frame{clientFrame(ws.OpContinuation, true, []byte("x"))}, ws.StatusProtocolError},
		{"new message inside a fragmented one", []ws.Frame{
			clientFrame(ws.OpText, false, []byte("a")),
			clientFrame(ws.OpBinary, true, []byte("b")),
		}, ws.StatusProtocolError},
		{"reserved data opcode", []ws.Frame{clientFrame(ws.OpCode(0x3), true, nil)}, ws.StatusProtocolError},
		{"reserved control opcode", []ws.Frame{clientFrame(ws.OpCode(0xB), true, nil)}, ws.StatusProtocolError},
		{"oversized ping", []ws.Frame{clientFrame(ws.OpPing, true, pattern(0, 126))}, ws.StatusProtocolError},
		{"oversized close", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(1000, strings.Repeat("r", 124)))}, ws.StatusProtocolError},
		{"fragmented ping", []ws.Frame{clientFrame(ws.OpPing, false, nil)}, ws.StatusProtocolError},
		{"close code 1005 on the wire", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(1005, ""))}, ws.StatusProtocolError},
		{"close code 1006 on the wire", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(1006, ""))}, ws.StatusProtocolError},
		{"close code 999", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(999, ""))}, ws.StatusProtocolError},
		{"close code 1016 (unassigned)", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(1016, ""))}, ws.StatusProtocolError},
		{"close code 5000", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(5000, ""))}, ws.StatusProtocolError},
		{"close with 1-byte payload", []ws.Frame{clientFrame(ws.OpClose, true, []byte{3})}, ws.StatusProtocolError},
		{"close reason not UTF-8", []ws.Frame{clientFrame(ws.OpClose, true, closeBody(1000, "\xc0"))}, ws.StatusProtocolError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
			writeRaw(t, raw, tt.frames...)
			checkFailed(t, srv, raw, tt.want)
		})
	}
}

// A violation in the peer's close frame says so (InClose) and keeps the code
// the frame carried, so the owner can tell a peer that closes badly from a
// frame gone wrong mid-stream.
func TestBrokenCloseNamed(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		code    ws.StatusCode // PeerCode
	}{
		{"reason not UTF-8", closeBody(1003, "\xff\xfe"), 1003},
		{"invalid code", closeBody(1006, ""), 1006},
		{"1-byte payload", []byte{3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
			writeRaw(t, raw, clientFrame(ws.OpClose, true, tt.payload))
			_, _, err := srv.ReadMessage()
			if pe := asProtocolError(t, err, ws.StatusProtocolError); !pe.InClose || pe.PeerCode != tt.code {
				t.Errorf("ProtocolError %+v, want InClose with PeerCode %d", pe, tt.code)
			}
		})
	}
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	f := clientFrame(ws.OpText, true, []byte("x"))
	f.Header.Rsv = 4
	writeRaw(t, raw, f)
	_, _, err := srv.ReadMessage()
	if pe := asProtocolError(t, err, ws.StatusProtocolError); pe.InClose {
		t.Errorf("reserved bits on a text frame: ProtocolError %+v, want InClose false", pe)
	}
}

// A payload length with the most significant bit set is invalid (RFC 6455 §5.2);
// gobwas reports it as an error of its own, which must still close with 1002.
func TestLengthMSBRejected(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	header := []byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4}
	if _, err := raw.Write(header); err != nil {
		t.Fatalf("write: %v", err)
	}
	checkFailed(t, srv, raw, ws.StatusProtocolError)
}

func checkFailed(t *testing.T, srv *wsconn.Conn, raw interface{ Read([]byte) (int, error) }, want ws.StatusCode) {
	t.Helper()
	_, _, err := srv.ReadMessage()
	asProtocolError(t, err, want)
	if _, _, again := srv.ReadMessage(); again != err {
		t.Fatalf("second ReadMessage returned %v, want the same %v", again, err)
	}
	expectClose(t, raw, false, want, nil)
	// The connection failed: tether closes without waiting for the peer's echo,
	// certainly well within CloseWait plus slack.
	waitDone(t, srv, closeWait+time.Second)
	if err := srv.Send(t.Context(), ws.OpText, []byte("late")); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Send after a protocol error: %v, want ErrClosed", err)
	}
}

// The client side applies the same rules to what the server sends.
func TestClientSideViolation(t *testing.T) {
	cli, raw := clientSide(t, wsconn.Options{CloseWait: closeWait})
	writeRaw(t, raw, ws.NewTextFrame([]byte("\xfe")))
	_, _, err := cli.ReadMessage()
	asProtocolError(t, err, ws.StatusInvalidFramePayloadData)
	expectClose(t, raw, true, ws.StatusInvalidFramePayloadData, nil)
}
