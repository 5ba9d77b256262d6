package upstreamtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// readBufferSize is the reader's bufio size; any value works, frames are
// reassembled independently of it.
const readBufferSize = 32 << 10

// Read returns the next data message from the client, reassembled from its
// fragments. Control frames never surface here: pings are answered (unless
// IgnorePings), pongs counted. Once the client has sent a close frame, Read
// returns a *CloseFrame error (after the close was echoed, unless
// IgnoreClose); after a client protocol violation a *ProtocolError; after a
// local close ErrClosed; otherwise the socket error (io.EOF, reset). Messages
// that arrived before the end are returned first. While the connection is
// stalled, Read waits for ctx or Close.
func (c *Conn) Read(ctx context.Context) (ws.OpCode, []byte, error) {
	if c.stalled.Load() {
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-c.closed:
			return 0, nil, ErrClosed
		}
	}
	select {
	case m, ok := <-c.in:
		return c.received(m, ok)
	case <-ctx.Done():
	}
	// Closing the connection also cancels Context: when both are ready,
	// prefer what the reader left (a message or the terminal error) over
	// the bare cancellation.
	select {
	case m, ok := <-c.in:
		return c.received(m, ok)
	default:
		return 0, nil, ctx.Err()
	}
}

func (c *Conn) received(m message, ok bool) (ws.OpCode, []byte, error) {
	if !ok {
		return 0, nil, c.terminalErr()
	}
	return m.op, m.data, nil
}

func (c *Conn) terminalErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// readLoop is the connection's only reader. It ends by closing the inbox and
// the connection; the server's WaitGroup owns it.
func (c *Conn) readLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	br := bufio.NewReaderSize(c.raw, readBufferSize)
	err := c.readFrames(br)
	// Nothing reads the socket from here on; Stall waits for this.
	close(c.readerIdle)
	err = c.settle(err)
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	close(c.in)
	if cf := (*CloseFrame)(nil); errors.As(err, &cf) && c.ignoreClose.Load() {
		// An unanswered closing handshake: TCP stays open until the script
		// closes the connection (or returns from OnConn).
		<-c.closed
	}
	_ = c.Close()
}

// settle turns the error that ended readFrames into the one Read reports,
// performing what the ending requires first.
func (c *Conn) settle(err error) error {
	if c.stalled.Load() {
		// Half-open: keep the socket as it is until someone closes it.
		<-c.closed
		return ErrClosed
	}
	var cf *CloseFrame
	if errors.As(err, &cf) {
		// Also when CloseWith started the closing handshake and has already
		// closed TCP after this echo: the client's frame is the news.
		return err
	}
	if c.isClosed() {
		return ErrClosed
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		c.logf("upstreamtest: conn %d: %v", c.n, pe)
		_ = c.writeControl(ws.OpClose, ws.NewCloseFrameBody(ws.StatusCode(pe.Code), ""))
	}
	return err
}

// readFrames reads frames until the connection ends, delivering data
// messages and handling control frames. It returns *CloseFrame when the
// client closed, *ProtocolError on a violation, or the read error.
func (c *Conn) readFrames(br *bufio.Reader) error {
	var (
		msg  []byte
		op   ws.OpCode
		frag bool
	)
	for !c.stalled.Load() {
		h, payload, err := c.readFrame(br, frag, int64(len(msg)))
		if c.stalled.Load() {
			// A read that raced with Stall (a deadline does not stop a read
			// whose data is already there): drop what it brought.
			return ErrStalled
		}
		if err != nil {
			return err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h.OpCode, payload); err != nil {
				return err
			}
			continue
		}
		if h.OpCode != ws.OpContinuation {
			op, msg = h.OpCode, nil
		}
		msg = append(msg, payload...)
		frag = !h.Fin
		if frag {
			continue
		}
		if err := c.deliver(op, msg); err != nil {
			return err
		}
		msg = nil
	}
	return ErrStalled
}

// readFrame reads and unmasks one frame, checking it against RFC 6455 and
// the message size limit (pending bytes already belong to the message).
func (c *Conn) readFrame(br *bufio.Reader, frag bool, pending int64) (ws.Header, []byte, error) {
	h, err := ws.ReadHeader(br)
	if err != nil {
		return h, nil, err
	}
	state := ws.StateServerSide
	if frag {
		state = state.Set(ws.StateFragmented)
	}
	if err := ws.CheckHeader(h, state); err != nil {
		return h, nil, &ProtocolError{Code: int(ws.StatusProtocolError), Err: err}
	}
	if !h.OpCode.IsControl() && h.Length > c.maxMsg-pending {
		err := fmt.Errorf("message longer than %d bytes", c.maxMsg)
		return h, nil, &ProtocolError{Code: int(ws.StatusMessageTooBig), Err: err}
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(br, payload); err != nil {
		return h, nil, err
	}
	ws.Cipher(payload, h.Mask, 0)
	return h, payload, nil
}

// deliver hands a complete message to Read, waiting while the inbox is full.
func (c *Conn) deliver(op ws.OpCode, msg []byte) error {
	if op == ws.OpText && !utf8.Valid(msg) {
		err := errors.New("invalid UTF-8 in text message")
		return &ProtocolError{Code: int(ws.StatusInvalidFramePayloadData), Err: err}
	}
	select {
	case c.in <- message{op: op, data: msg}:
		return nil
	case <-c.stall:
		return ErrStalled
	case <-c.closed:
		return ErrClosed
	}
}

// control handles one control frame; it returns *CloseFrame for a close.
func (c *Conn) control(op ws.OpCode, payload []byte) error {
	switch op {
	case ws.OpPing:
		c.pings.Add(1)
		if !c.ignorePings.Load() {
			// Errors surface on the next read or write; a stalled or closing
			// connection simply does not answer.
			_ = c.writeControl(ws.OpPong, payload)
		}
		return nil
	case ws.OpPong:
		c.pongs.Add(1)
		return nil
	default:
		return c.clientClosed(payload)
	}
}

// clientClosed records the client's close frame and, unless told to ignore
// it, echoes it (RFC 6455 section 5.5.1) before the reader closes TCP.
func (c *Conn) clientClosed(payload []byte) error {
	if len(payload) == 1 {
		err := errors.New("close frame with a 1-byte payload")
		return &ProtocolError{Code: int(ws.StatusProtocolError), Err: err}
	}
	cf := &CloseFrame{Code: int(ws.StatusNoStatusRcvd)}
	if len(payload) >= 2 {
		code, reason := ws.ParseCloseFrameData(payload)
		cf.Code, cf.Reason = int(code), reason
	}
	c.mu.Lock()
	c.closeFrame = cf
	c.mu.Unlock()
	close(c.gotClose)
	if !c.ignoreClose.Load() {
		// Echo the status code only: 1005 must never be sent on the wire.
		echo := payload[:min(len(payload), 2)]
		_ = c.writeControl(ws.OpClose, echo)
	}
	return cf
}
