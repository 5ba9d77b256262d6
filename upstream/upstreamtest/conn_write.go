package upstreamtest

import (
	"bytes"
	"fmt"

	"github.com/gobwas/ws"
)

// frame is one frame to write; server frames are never masked.
type frame struct {
	op   ws.OpCode
	fin  bool
	data []byte
}

// Send writes one text message as a single frame.
func (c *Conn) Send(text string) error {
	return c.write(ws.OpText, []byte(text))
}

// SendBinary writes one binary message as a single frame.
func (c *Conn) SendBinary(b []byte) error {
	return c.write(ws.OpBinary, b)
}

// SendFragmented writes one text message as parts frames (a text frame and
// continuation frames), each in its own Write. parts is clamped to
// [1, len(text)]; the split is by bytes, so a part may end inside a UTF-8
// sequence, which RFC 6455 allows (only the whole message must be valid).
func (c *Conn) SendFragmented(text string, parts int) error {
	return c.writeFrames(fragments([]byte(text), parts)...)
}

// Ping sends a ping frame. The client's pong is counted by Pongs.
func (c *Conn) Ping(payload []byte) error {
	if len(payload) > ws.MaxControlFramePayloadSize {
		return ErrControlTooLong
	}
	return c.writeControl(ws.OpPing, payload)
}

func (c *Conn) write(op ws.OpCode, data []byte) error {
	return c.writeFrames(frame{op: op, fin: true, data: data})
}

func (c *Conn) writeControl(op ws.OpCode, data []byte) error {
	return c.writeFrames(frame{op: op, fin: true, data: data})
}

// writeFrames is the only function that writes frames after the handshake.
// It writes each frame with one Write call, under the write mutex.
func (c *Conn) writeFrames(frames ...frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.isClosed() {
		return ErrClosed
	}
	if c.stalled.Load() {
		return ErrStalled
	}
	if c.sentClose {
		return ErrCloseSent
	}
	var buf bytes.Buffer
	for _, f := range frames {
		buf.Reset()
		appendFrame(&buf, f.op, f.fin, f.data)
		if _, err := c.raw.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("write %v frame: %w", f.op, err)
		}
		if f.op == ws.OpClose {
			c.sentClose = true
		}
	}
	return nil
}

// appendFrame appends an unmasked frame to buf.
func appendFrame(buf *bytes.Buffer, op ws.OpCode, fin bool, data []byte) {
	// Writing to a bytes.Buffer cannot fail.
	_ = ws.WriteHeader(buf, ws.Header{Fin: fin, OpCode: op, Length: int64(len(data))})
	buf.Write(data)
}

// fragments splits data into parts frames of near-equal size.
func fragments(data []byte, parts int) []frame {
	parts = max(1, min(parts, len(data)))
	out := make([]frame, 0, parts)
	size := len(data) / parts
	for i := range parts {
		end := (i + 1) * size
		if i == parts-1 {
			end = len(data)
		}
		op := ws.OpContinuation
		if i == 0 {
			op = ws.OpText
		}
		out = append(out, frame{op: op, fin: i == parts-1, data: data[i*size : end]})
	}
	return out
}
