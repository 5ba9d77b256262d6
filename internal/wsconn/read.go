package wsconn

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// readChunk bounds how much of a peer-declared payload is allocated before the
// bytes arrive, so a header claiming 16 MiB costs nothing until it is sent.
const readChunk = 64 << 10

// ReadMessage returns the next data message: its opcode (ws.OpText or ws.OpBinary)
// and its payload, reassembled from fragments. The payload is valid until the next
// call. Control frames are handled here. After the peer's close frame it returns
// *CloseError; after a framing or limit violation, *ProtocolError (tether has
// sent the matching close frame); after a socket error, that error. Every later
// call returns the same error.
func (c *Conn) ReadMessage() (ws.OpCode, []byte, error) { return c.ReadMessageFlushing(nil) }

// ReadMessageFlushing is ReadMessage for a reader that holds back what it read
// to pass it on in batches (SendBatch): unless the next message already sits
// whole in the read buffer (MessageBuffered), it calls flush, when not nil,
// before it reads from the socket, so the reader never sits on messages while
// it waits. flush runs on the calling goroutine and may block.
func (c *Conn) ReadMessageFlushing(flush func()) (op ws.OpCode, p []byte, err error) {
	if c.readErr != nil {
		return 0, nil, c.readErr
	}
	c.dropMessage() // the last one's payload is no longer valid
	op, p, done, err := c.readWhole()
	if !done && len(c.bufferedBytes()) == 0 {
		// Nothing buffered: the read waits, so the batch goes first. The
		// next burst then starts in the buffer, and its first message (a
		// lone one, in sparse traffic) is read in place like the rest,
		// with its frame (Frame).
		if flush != nil {
			flush()
			flush = nil
		}
		if err = c.br.fill(); err == nil {
			op, p, done, err = c.readWhole()
		} else {
			done = true
		}
	}
	if !done {
		if flush != nil && !c.MessageBuffered() {
			flush()
		}
		c.aheadN = 0 // the general path reads through the buffer
		op, p, err = c.readMessage()
		c.releaseAssembly()
	}
	if err != nil {
		c.readErr = err
		c.dropMessage()
		c.br.stop()
		c.readFailed(err)
		return 0, nil, err
	}
	return op, p, nil
}

// dropMessage lets go of the buffers the last message was read or inflated
// into: borrowed ones go back to the pool, so that a connection waiting for
// its next message holds none, and one a large message grew is left to the
// collector.
func (c *Conn) dropMessage() {
	if c.msgBuf != nil {
		c.giveBack(c.msgBuf)
		c.msgBuf = nil
	}
	c.msg = nil
	c.frame, c.frameOpen = nil, false
	if z := c.inflater; z != nil && z.outBuf != nil {
		c.giveBack(z.outBuf)
		z.outBuf = nil
	}
}

// assembled counts n more bytes of the message being reassembled on
// Options.Account (docs/design.md "Memory"), from its first byte read until
// it is whole: the memory a peer can hold by sending a large message slowly.
// While the message fits in the buffer it borrowed, the buffer is what
// counts (borrow); what outgrows it counts here, by its size.
// Once whole it is handed over, and whatever the caller keeps of it counts
// where it keeps it (a queue, the hold buffer): counting it here as well
// would make what the budget refuses depend on how TCP cut the message,
// since one that arrives whole in the read buffer is returned from there.
// It never waits, and takes the bytes even when the budget has no room: a
// half-read message is freed only by reading the rest of it, so a reader
// waiting on the budget in the middle of one would wait for itself, and one
// waiting before its first byte would leave the peer's pongs and close
// frame unread. The message's next buffer (the queue towards the app or
// the upstream) waits instead, and MaxMessageBytes bounds what one message
// takes beyond the budget.
func (c *Conn) assembled(n int64) {
	if a := c.opts.Account; a != nil {
		a.Reserve(n)
		c.asm += n
	}
}

// releaseAssembly gives back what the last message held on Options.Account
// beyond its borrowed buffer.
func (c *Conn) releaseAssembly() {
	if c.asm > 0 {
		c.opts.Account.Release(c.asm)
		c.asm = 0
	}
}

// readWhole returns the next message in place, without copying it out of the
// read buffer, when it is one frame that already sits whole there and breaks
// no rule: the common case of a burst of small messages, where the general
// path's reads of header and payload through the buffer cost more than the
// message itself. done is false, with nothing consumed, when the general path
// must read it.
func (c *Conn) readWhole() (op ws.OpCode, p []byte, done bool, err error) {
	b := c.bufferedBytes()
	h, n := c.ahead, c.aheadN
	if n == 0 {
		var ok bool
		if h, n, ok = c.wholeFrame(b); !ok {
			return 0, nil, false, nil
		}
	}
	p = b[n : n+int(h.Length)]
	c.consume(n + len(p))
	c.ahead, c.aheadN, _ = c.wholeFrame(b[n+len(p):])
	c.frame, c.frameHdr = b[:n+len(p)], n
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
		c.frameMask, c.frameOpen = h.Mask, true
	}
	if h.OpCode == ws.OpText && !utf8.Valid(p) {
		return 0, nil, true, c.protocolError(ws.StatusInvalidFramePayloadData, "invalid UTF-8 in text message")
	}
	return h.OpCode, p, true, nil
}

// wholeFrame returns the header of the frame at the start of b when the frame
// is whole in b and plain (plainFrame); n is 0 otherwise. Looking at the next
// frame as soon as one is consumed, while it is in the cache, serves both
// MessageBuffered and the next readWhole.
func (c *Conn) wholeFrame(b []byte) (h ws.Header, n int, ok bool) {
	h, n, ok = peekHeader(b)
	if !ok || !c.plainFrame(h) || h.Length > int64(len(b)-n) {
		return ws.Header{}, 0, false
	}
	return h, n, true
}

// plainFrame reports whether h is a whole text or binary message that
// checkHeader accepts.
func (c *Conn) plainFrame(h ws.Header) bool {
	return h.Fin && h.Rsv == 0 && h.Masked != c.opts.Client &&
		(h.OpCode == ws.OpText || h.OpCode == ws.OpBinary) && h.Length <= c.opts.MaxMessageBytes
}

// readMessage is the general path: it reassembles the next data message
// from its frames through the read buffer, handling control frames between
// them, and inflates it when it came compressed (RSV1 on its first frame,
// with Deflate negotiated).
func (c *Conn) readMessage() (ws.OpCode, []byte, error) {
	c.msgCost = 0
	var op ws.OpCode
	compressed := false
	for {
		h, err := ws.ReadHeaderBuffer(c.br, c.hdr[:])
		if errors.Is(err, ws.ErrHeaderLengthMSB) {
			// A 64-bit length with the top bit set breaks §5.2: fail with 1002
			// like any other framing violation, not as a socket error.
			return 0, nil, c.protocolError(ws.StatusProtocolError, "payload length with the most significant bit set")
		}
		if err != nil {
			return 0, nil, err
		}
		if err := c.checkHeader(h, op != 0); err != nil {
			return 0, nil, err
		}
		if h.OpCode.IsControl() {
			if err := c.readControl(h); err != nil {
				return 0, nil, err
			}
			continue
		}
		if err := c.readPayload(h); err != nil {
			return 0, nil, err
		}
		c.msgCost += max(h.Length, 1)
		if op == 0 {
			op, compressed = h.OpCode, h.Rsv&rsv1 != 0
		}
		if h.Fin {
			return c.finishMessage(op, compressed)
		}
	}
}

// finishMessage inflates a compressed message and checks that text is UTF-8.
func (c *Conn) finishMessage(op ws.OpCode, compressed bool) (ws.OpCode, []byte, error) {
	p := c.msg
	if compressed {
		var err error
		if p, err = c.inflate(p); err != nil {
			return 0, nil, err
		}
	}
	if op == ws.OpText && !utf8.Valid(p) {
		return 0, nil, c.protocolError(ws.StatusInvalidFramePayloadData, "invalid UTF-8 in text message")
	}
	return op, p, nil
}

// checkHeader applies RFC 6455 §5.2–5.5 to one frame header. inMessage tells
// whether a fragmented message is in progress.
func (c *Conn) checkHeader(h ws.Header, inMessage bool) error {
	// RFC 7692 §6: with permessage-deflate, RSV1 marks the first frame of
	// a compressed data message, and nothing else.
	compressedStart := h.Rsv == rsv1 && c.opts.Deflate != nil && (h.OpCode == ws.OpText || h.OpCode == ws.OpBinary)
	switch {
	case h.Rsv != 0 && !compressedStart:
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
	// An empty fragment costs a byte (msgCost): a peer sending empty
	// continuation frames without end reaches the limit too.
	if !h.OpCode.IsControl() && c.msgCost+max(h.Length, 1) > c.opts.MaxMessageBytes {
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
		c.growMessage(int(n))
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

// growMessage makes room for n more bytes at the end of c.msg and counts
// them: in a borrowed buffer while the message fits in one, in a buffer of
// its own, counted by its size, once it outgrows it.
func (c *Conn) growMessage(n int) {
	at := len(c.msg)
	if c.msg == nil && n <= readBufferSize {
		c.msgBuf = c.borrow()
		c.msg = c.msgBuf.b[:0]
	}
	if cap(c.msg)-at < n {
		c.msg = grow(c.msg, n)[:at]
		if c.msgBuf != nil { // copied out: the bytes so far count by their size from now on
			c.giveBack(c.msgBuf)
			c.msgBuf = nil
			c.assembled(int64(at))
		}
	}
	if c.msgBuf == nil {
		c.assembled(int64(n))
	}
	c.msg = c.msg[:at+n]
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
		return c.badClose(0, "close frame with a 1-byte payload")
	}
	code, reason := ws.ParseCloseFrameData(p)
	if len(p) < 2 {
		// gobwas returns 0 for a frame without a code; RFC 6455 §7.1.5 calls
		// that 1005, which is what CloseError documents.
		code = ws.StatusNoStatusRcvd
	} else if !validReceivedCode(code) {
		return c.badClose(code, "invalid close code")
	}
	if !utf8.ValidString(reason) {
		return c.badClose(code, "close reason is not UTF-8")
	}
	c.wakeClose()
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

// badClose is a protocolError for a close frame that breaks §5.5.1 or
// §7.4: peerCode is the code it carried, 0 when it had none.
func (c *Conn) badClose(peerCode ws.StatusCode, reason string) error {
	c.sendClose(ws.StatusProtocolError, reason)
	return &ProtocolError{Code: ws.StatusProtocolError, Reason: reason, InClose: true, PeerCode: peerCode}
}

// readFailed lets the writer finish after the reader stopped. A socket error means
// the connection is gone: closing TCP now stops the writer too. After a close
// frame or a protocol error, the close we queued must still be written.
func (c *Conn) readFailed(err error) {
	var ce *CloseError
	var pe *ProtocolError
	if errors.As(err, &ce) || errors.As(err, &pe) {
		c.wakeClose()
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

// MessageBuffered reports whether a whole message already waits in the read
// buffer, so that the next ReadMessage returns it without waiting for the
// socket. Only the reader may call it. A reader that holds back what it read
// to pass it on in batches (SendBatch) asks before each read, and passes its
// batch on first when the answer is false: it must not sit on messages while
// it waits. False may also mean "hard to tell" (a message in many fragments),
// never that the read is certain to wait.
func (c *Conn) MessageBuffered() bool {
	if c.aheadN > 0 {
		return true // the common case, decided when the last message was read
	}
	b := c.bufferedBytes()
	for range maxPeekFrames {
		h, n, ok := peekHeader(b)
		if !ok || h.Length > int64(len(b)-n) {
			return false
		}
		if h.Fin && !h.OpCode.IsControl() {
			return true
		}
		b = b[n+int(h.Length):]
	}
	return false
}

// maxPeekFrames bounds the frames MessageBuffered looks through: control
// frames and fragments in between are rare, and the look must stay cheap.
const maxPeekFrames = 4

// bufferedBytes returns what the read buffer holds, unread.
func (c *Conn) bufferedBytes() []byte { return c.br.buffered() }

// consume drops n bytes of what bufferedBytes returned, read in place. They
// stay where they are until the next read from the buffer.
func (c *Conn) consume(n int) { c.br.consume(n) }

// peekHeader parses the frame header at the start of b (RFC 6455 §5.2) and
// returns it with its size. ok is false when b does not hold a whole header,
// or holds one that gobwas' ReadHeader refuses (a length with the top bit
// set): the general path then reads it and reports what is wrong.
func peekHeader(b []byte) (h ws.Header, n int, ok bool) {
	if len(b) < 2 {
		return h, 0, false
	}
	h.Fin, h.Rsv, h.OpCode = b[0]&0x80 != 0, (b[0]&0x70)>>4, ws.OpCode(b[0]&0x0f)
	h.Masked = b[1]&0x80 != 0
	h.Length, n = int64(b[1]&0x7f), 2
	switch h.Length {
	case 126:
		if len(b) < 4 {
			return h, 0, false
		}
		h.Length, n = int64(binary.BigEndian.Uint16(b[2:4])), 4
	case 127:
		if len(b) < 10 {
			return h, 0, false
		}
		u := binary.BigEndian.Uint64(b[2:10])
		if u > math.MaxInt64 {
			return h, 0, false
		}
		h.Length, n = int64(u), 10
	}
	if h.Masked {
		if len(b) < n+4 {
			return h, 0, false
		}
		copy(h.Mask[:], b[n:n+4])
		n += 4
	}
	return h, n, true
}
