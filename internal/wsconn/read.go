package wsconn

import (
	"errors"
	"io"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// maxRetainedBytes is the largest reassembly buffer kept between messages; a
// buffer grown beyond it by one huge message is released afterwards.
const maxRetainedBytes = 1 << 20

// readChunk bounds how much of a peer-declared payload is allocated before the
// bytes arrive, so a header claiming 16 MiB costs nothing until it is sent.
const readChunk = 64 << 10

// ReadMessage returns the next data message: its opcode (ws.OpText or ws.OpBinary)
// and its payload, reassembled from fragments. The payload is valid until the next
// call. Control frames are handled here. After the peer's close frame it returns
// *CloseError; after a framing or limit violation, *ProtocolError (tether has
// sent the matching close frame); after a socket error, that error. Every later
// call returns the same error.
func (c *Conn) ReadMessage() (ws.OpCode, []byte, error) {
	if c.readErr != nil {
		return 0, nil, c.readErr
	}
	op, err := c.readMessage()
	if err != nil {
		c.readErr = err
		c.readFailed(err)
		return 0, nil, err
	}
	return op, c.msg, nil
}

func (c *Conn) readMessage() (ws.OpCode, error) {
	if cap(c.msg) > maxRetainedBytes {
		c.msg = nil
	}
	c.msg = c.msg[:0]
	var op ws.OpCode
	for {
		h, err := ws.ReadHeaderBuffer(c.br, c.hdr[:])
		if errors.Is(err, ws.ErrHeaderLengthMSB) {
			// A 64-bit length with the top bit set breaks §5.2: fail with 1002
			// like any other framing violation, not as a socket error.
			return 0, c.protocolError(ws.StatusProtocolError, "payload length with the most significant bit set")
		}
		if err != nil {
			return 0, err
		}
		if err := c.checkHeader(h, op != 0); err != nil {
			return 0, err
		}
		if h.OpCode.IsControl() {
			if err := c.readControl(h); err != nil {
				return 0, err
			}
			continue
		}
		if err := c.readPayload(h); err != nil {
			return 0, err
		}
		if op == 0 {
			op = h.OpCode
		}
		if h.Fin {
			if op == ws.OpText && !utf8.Valid(c.msg) {
				return 0, c.protocolError(ws.StatusInvalidFramePayloadData, "invalid UTF-8 in text message")
			}
			return op, nil
		}
	}
}

// checkHeader applies RFC 6455 §5.2–5.5 to one frame header. inMessage tells
// whether a fragmented message is in progress.
func (c *Conn) checkHeader(h ws.Header, inMessage bool) error {
	switch {
	case h.Rsv != 0:
		return c.protocolError(ws.StatusProtocolError, "reserved bits set without a negotiated extension")
	case h.Masked == c.opts.Client:
		if c.opts.Client {
			return c.protocolError(ws.StatusProtocolError, "masked frame from server")
		}
		return c.protocolError(ws.StatusProtocolError, "unmasked frame from client")
	case h.OpCode.IsReserved():
		return c.protocolError(ws.StatusProtocolError, "reserved opcode")
	case h.OpCode.IsControl():
		if !h.Fin || h.Length > 125 {
			return c.protocolError(ws.StatusProtocolError, "fragmented or oversized control frame")
		}
	case h.OpCode == ws.OpContinuation && !inMessage:
		return c.protocolError(ws.StatusProtocolError, "continuation frame without a message")
	case h.OpCode != ws.OpContinuation && inMessage:
		return c.protocolError(ws.StatusProtocolError, "new message before the previous one ended")
	}
	// Control frames are not part of the message being reassembled (§5.4), so
	// a ping in the middle of a message at the limit does not count against it.
	if !h.OpCode.IsControl() && int64(len(c.msg))+h.Length > c.opts.MaxMessageBytes {
		return c.protocolError(ws.StatusMessageTooBig, "message exceeds the size limit")
	}
	return nil
}

// readPayload appends the frame's payload to c.msg, growing it as bytes arrive.
func (c *Conn) readPayload(h ws.Header) error {
	start := len(c.msg)
	for remaining := h.Length; remaining > 0; {
		n := min(remaining, readChunk)
		at := len(c.msg)
		c.msg = grow(c.msg, int(n))
		if _, err := io.ReadFull(c.br, c.msg[at:at+int(n)]); err != nil {
			return noEOF(err)
		}
		remaining -= n
	}
	if h.Masked {
		ws.Cipher(c.msg[start:], h.Mask, 0)
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// readControl handles one control frame (RFC 6455 §5.5).
func (c *Conn) readControl(h ws.Header) error {
	p := c.ctl[:h.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return noEOF(err)
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	switch h.OpCode {
	case ws.OpPing:
		c.queueControl(ws.OpPong, p)
	case ws.OpPong:
		if c.opts.Pong != nil {
			c.opts.Pong()
		}
	case ws.OpClose:
		return c.peerClosed(p)
	}
	return nil
}

// peerClosed validates the peer's close frame, echoes it (§5.5.1) and returns it.
func (c *Conn) peerClosed(p []byte) error {
	if len(p) == 1 {
		return c.protocolError(ws.StatusProtocolError, "close frame with a 1-byte payload")
	}
	code, reason := ws.ParseCloseFrameData(p)
	if len(p) < 2 {
		// gobwas returns 0 for a frame without a code; RFC 6455 §7.1.5 calls
		// that 1005, which is what CloseError documents.
		code = ws.StatusNoStatusRcvd
	} else if !validReceivedCode(code) {
		return c.protocolError(ws.StatusProtocolError, "invalid close code")
	}
	if !utf8.ValidString(reason) {
		return c.protocolError(ws.StatusProtocolError, "close reason is not UTF-8")
	}
	c.peerOnce.Do(func() { close(c.peerClose) })
	echo := code
	if len(p) < 2 {
		echo = ws.StatusNormalClosure
	}
	c.sendClose(echo, "")
	return &CloseError{Code: code, Reason: reason}
}

// validReceivedCode reports whether a peer may send code (RFC 6455 §7.4).
func validReceivedCode(code ws.StatusCode) bool {
	switch {
	case code < 1000, code == 1004, code == 1005, code == 1006, code == 1015:
		return false
	case code < 3000:
		return code <= 1014
	default:
		return code <= 4999
	}
}

func (c *Conn) protocolError(code ws.StatusCode, reason string) error {
	c.sendClose(code, reason)
	return &ProtocolError{Code: code, Reason: reason}
}

// readFailed lets the writer finish after the reader stopped. A socket error means
// the connection is gone: closing TCP now stops the writer too. After a close
// frame or a protocol error, the close we queued must still be written.
func (c *Conn) readFailed(err error) {
	var ce *CloseError
	var pe *ProtocolError
	if errors.As(err, &ce) || errors.As(err, &pe) {
		c.peerOnce.Do(func() { close(c.peerClose) })
		return
	}
	c.Abort()
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
