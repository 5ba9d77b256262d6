package wsconn_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// streamConn is a net.Conn whose peer sent exactly the bytes of a fuzz input
// and then closed: reads return them and then io.EOF, writes are discarded.
type streamConn struct {
	r *bytes.Reader
}

func (c streamConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c streamConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c streamConn) Close() error                     { return nil }
func (c streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c streamConn) SetDeadline(time.Time) error      { return nil }
func (c streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c streamConn) SetWriteDeadline(time.Time) error { return nil }

// Fuzz limits: a small one that fuzzed lengths cross easily, and the largest
// TETHER_MAX_MESSAGE_BYTES allows, where only the reader's chunking keeps a
// peer-declared length from being allocated before its bytes arrive.
const (
	fuzzSmallLimit = 1 << 10
	fuzzLargeLimit = 1 << 30
	// fuzzOverhead is what one Conn allocates whatever it reads (buffers,
	// queues, the writer goroutine) plus one read chunk of a message.
	fuzzOverhead = 512 << 10
)

// FuzzReadMessage feeds arbitrary bytes as the peer's side of a connection,
// on the server side (the app) and the client side (the upstream). Whatever
// arrives, ReadMessage returns whole data messages within the limit (text
// always valid UTF-8) until it returns an error, which it then keeps
// returning; nothing panics, the writer goroutine ends, and memory grows with
// the bytes received, not with the lengths their frame headers claim.
func FuzzReadMessage(f *testing.F) {
	f.Add(ws.MustCompileFrame(ws.NewTextFrame([]byte("hello"))), true, true)
	f.Add(maskedFrame(ws.NewTextFrame([]byte("hello"))), false, true)
	f.Fuzz(func(t *testing.T, data []byte, client, small bool) {
		limit := int64(fuzzLargeLimit)
		if small {
			limit = fuzzSmallLimit
		}
		before := totalAlloc()
		c := wsconn.New(streamConn{bytes.NewReader(data)}, nil, wsconn.Options{
			Client: client, MaxMessageBytes: limit, CloseWait: time.Millisecond,
		})
		err := readAll(t, c, limit, len(data))
		if _, _, again := c.ReadMessage(); again != err {
			t.Errorf("ReadMessage after %v returned %v", err, again)
		}
		c.Abort()
		<-c.Done()
		if grown := totalAlloc() - before; grown > fuzzOverhead+8*uint64(len(data)) {
			t.Errorf("reading %d bytes allocated %d", len(data), grown)
		}
	})
}

// readAll reads messages until an error, checking each, and returns the error.
func readAll(t *testing.T, c *wsconn.Conn, limit int64, n int) error {
	for i := 0; ; i++ {
		op, msg, err := c.ReadMessage()
		if err != nil {
			checkReadError(t, err)
			return err
		}
		switch {
		case op != ws.OpText && op != ws.OpBinary:
			t.Fatalf("message %d: opcode %v, want text or binary", i, op)
		case int64(len(msg)) > limit:
			t.Fatalf("message %d: %d bytes over the limit of %d", i, len(msg), limit)
		case op == ws.OpText && !utf8.Valid(msg):
			t.Fatalf("message %d: text message is not UTF-8", i)
		case i > n/2:
			// Every frame takes at least two bytes.
			t.Fatalf("%d messages out of %d bytes", i+1, n)
		}
	}
}

// checkReadError accepts the end of the stream, the peer's close and a
// protocol error whose close code tether may send.
func checkReadError(t *testing.T, err error) {
	var ce *wsconn.CloseError
	var pe *wsconn.ProtocolError
	switch {
	case errors.As(err, &ce):
	case errors.As(err, &pe):
		switch pe.Code {
		case ws.StatusProtocolError, ws.StatusInvalidFramePayloadData, ws.StatusMessageTooBig:
		default:
			t.Fatalf("protocol error with close code %d", pe.Code)
		}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func maskedFrame(f ws.Frame) []byte {
	return ws.MustCompileFrame(ws.MaskFrameInPlace(f))
}
