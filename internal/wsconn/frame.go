package wsconn

import (
	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
)

// Frame pass-through (docs/performance.md): a message forwarded
// unchanged from one Conn to another is written as the frame it arrived in,
// header and mask included, rather than encoded again. The reader keeps the
// frame of a message it returned in place (Frame); the other Conn appends
// it as it is when its own frames look the same (AppendFrame). That saves
// the header, a fresh masking key and, towards a client-side Conn, masking
// the payload again; and the peer gets the very bytes the other peer sent.

// Frame returns the frame the message the last ReadMessage returned arrived
// in, header included, as the peer sent it: masked when the peer masked
// it. It is nil when the message did not arrive as one whole frame sitting
// in the read buffer (a fragmented or compressed message, one read through
// the buffer): only such a frame is returned in place.
//
// A masked frame's payload is masked again in place: the payload
// ReadMessage returned holds the masked bytes from then on, so the caller
// asks for the frame once it is done reading the message. Like the
// payload, the frame is valid until the next read. Only the reader may
// call it.
func (c *Conn) Frame() []byte {
	if c.frameOpen {
		ws.Cipher(c.frame[c.frameHdr:], c.frameMask, 0)
		c.frameOpen = false
	}
	return c.frame
}

// AppendFrame appends frame, one whole data frame another Conn's Frame
// returned, to b, counting its payload against the queue. It appends the
// frame as it is, and reports true, when its bytes are what this Conn would
// send for it: masked as this Conn's frames are (RFC 6455 §5.1: a client
// masks every frame, a server none) and not a payload this Conn compresses
// (Deflate.Compress). Otherwise it encodes the payload again, as Append
// does, unmasking it in place first when it is masked: frame is the
// caller's no more after the call.
//
// A client frame keeps the masking key its sender chose: the key only has
// to be one the sending side picked unpredictably for the frame (§5.3),
// which the app did, and a server reads it the same whoever forwarded it.
func (c *Conn) AppendFrame(b *sendq.Batch, frame []byte) bool {
	h, n := frameHeader(frame)
	p := frame[n:]
	if h.Masked == c.opts.Client && !c.compresses(len(p)) {
		w := b.Add()
		w.B = append(w.B, frame...)
		w.Count += int64(len(p))
		return true
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	c.Append(b, h.OpCode, p)
	return false
}

// FrameMessage returns the opcode and payload of frame, one whole data
// frame a Conn's Frame returned, unmasking the payload in place: for a
// socket that writes messages in an encoding of its own (a tcp:// line),
// given a frame to pass on.
func FrameMessage(frame []byte) (ws.OpCode, []byte) {
	h, n := frameHeader(frame)
	p := frame[n:]
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	return h.OpCode, p
}

// NextFrame splits the first frame off b, a run of whole frames encoded by
// Append or AppendFrame (a sendq.Buf's bytes), for a caller that takes back
// messages a Conn did not queue (QueueBatch).
func NextFrame(b []byte) (frame, rest []byte) {
	h, n, ok := peekHeader(b)
	if !ok || h.Length > int64(len(b)-n) {
		panic("wsconn: NextFrame of something else than whole frames")
	}
	end := n + int(h.Length)
	return b[:end], b[end:]
}

// frameHeader parses the header of frame, which Frame returned: a whole
// frame, checked as it was read.
func frameHeader(frame []byte) (ws.Header, int) {
	h, n, ok := peekHeader(frame)
	if !ok || int64(len(frame)-n) != h.Length {
		panic("wsconn: a frame to pass on is not one whole frame")
	}
	return h, n
}

// compresses reports whether Send compresses a data message of n bytes.
func (c *Conn) compresses(n int) bool {
	d := c.opts.Deflate
	return d != nil && d.Compress && n >= CompressMinBytes
}
