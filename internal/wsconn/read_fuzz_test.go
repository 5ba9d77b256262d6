package wsconn_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// trickleConn is a streamConn whose reads return one byte at a time, so the
// read buffer never holds a whole frame: every message takes the general
// path, never the in-place one.
type trickleConn struct{ streamConn }

func (c trickleConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), 1)]) }

// FuzzReadInPlace holds the in-place read of a message sitting whole in the
// read buffer to the general path: the same bytes, read with a buffer that
// holds the whole input and with one that never holds a whole frame, give the
// same messages and end with the same error; and the frame an in-place
// message keeps for passing on carries that message.
func FuzzReadInPlace(f *testing.F) {
	f.Add(append(ws.MustCompileFrame(ws.NewTextFrame([]byte("hello"))),
		ws.MustCompileFrame(ws.NewBinaryFrame(bytes.Repeat([]byte("b"), 300)))...), true, true)
	f.Add(append(maskedFrame(ws.NewTextFrame([]byte("hi"))), maskedFrame(ws.NewTextFrame([]byte{0xff}))...), false, true)
	f.Add(append(maskedFrame(ws.NewPingFrame(nil)), maskedFrame(ws.NewTextFrame(make([]byte, 2000)))...), false, true)
	f.Fuzz(func(t *testing.T, data []byte, client, small bool) {
		limit := int64(fuzzLargeLimit)
		if small {
			limit = fuzzSmallLimit
		}
		opts := wsconn.Options{Client: client, MaxMessageBytes: limit, CloseWait: time.Millisecond}
		whole := readTrace(wsconn.New(streamConn{bytes.NewReader(data)}, nil, opts))
		trickled := readTrace(wsconn.New(trickleConn{streamConn{bytes.NewReader(data)}}, nil, opts))
		if whole != trickled {
			t.Fatalf("read whole:\n%s\nread a byte at a time:\n%s", whole, trickled)
		}
	})
}

// readTrace reads c to its first error and describes what it read. A
// message's frame (Frame) that does not carry the message shows in the
// description too.
func readTrace(c *wsconn.Conn) string {
	defer func() {
		c.Abort()
		<-c.Done()
	}()
	var b bytes.Buffer
	for {
		op, p, err := c.ReadMessage()
		if err != nil {
			var pe *wsconn.ProtocolError
			var ce *wsconn.CloseError
			switch {
			case errors.As(err, &pe):
				fmt.Fprintf(&b, "protocol error %d %q\n", pe.Code, pe.Reason)
			case errors.As(err, &ce):
				fmt.Fprintf(&b, "close %d %q\n", ce.Code, ce.Reason)
			default:
				fmt.Fprintf(&b, "end %v\n", err)
			}
			return b.String()
		}
		fmt.Fprintf(&b, "%v %q\n", op, p)
		// The frame, when the message has one, carries the very message.
		want := bytes.Clone(p)
		if f := c.Frame(); f != nil {
			fop, fp := wsconn.FrameMessage(bytes.Clone(f))
			if fop != op || !bytes.Equal(fp, want) {
				fmt.Fprintf(&b, "its frame carries %v %q\n", fop, fp)
			}
		}
	}
}
