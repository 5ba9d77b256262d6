package transport

import (
	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// The session treats every app socket alike (proxy's appConn), and a
// WebSocket app's (wsconn.Conn) passes whole frames on as they arrived and
// batches what it reads. Lines and events are no frames: a frame to pass on
// becomes a message again, and a reader's batch goes out before every read.

// ReadMessageFlushing calls flush, when not nil, then ReadMessage: a read
// may always wait for the app.
func (c *LineConn) ReadMessageFlushing(flush func()) (ws.OpCode, []byte, error) {
	if flush != nil {
		flush()
	}
	return c.ReadMessage()
}

// Frame is nil: a line is no WebSocket frame.
func (c *LineConn) Frame() []byte { return nil }

// AppendFrame appends the message frame carries as a line (Append), and
// reports false: it never goes as it is.
func (c *LineConn) AppendFrame(b *sendq.Batch, frame []byte) bool {
	op, p := wsconn.FrameMessage(frame)
	c.Append(b, op, p)
	return false
}

// ReadMessageFlushing calls flush, when not nil, then ReadMessage, which
// waits for the session's end.
func (a *SSEApp) ReadMessageFlushing(flush func()) (ws.OpCode, []byte, error) {
	if flush != nil {
		flush()
	}
	return a.ReadMessage()
}

// Frame is nil: an sse:// app sends nothing.
func (a *SSEApp) Frame() []byte { return nil }

// AppendFrame appends the message frame carries as an event (Append), and
// reports false: it never goes as it is.
func (a *SSEApp) AppendFrame(b *sendq.Batch, frame []byte) bool {
	op, p := wsconn.FrameMessage(frame)
	a.Append(b, op, p)
	return false
}
