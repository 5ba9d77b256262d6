package wsconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// frame is one encoded frame (header and payload, masked on the client side),
// pooled so the steady state allocates nothing.
type frame struct {
	buf   []byte
	size  int64 // bytes reserved against QueueBytes
	close bool
}

var framePool = sync.Pool{New: func() any { return new(frame) }}

// maxPooledFrame keeps one huge message from pinning its buffer in the pool.
const maxPooledFrame = 64 << 10

func putFrame(f *frame) {
	if cap(f.buf) > maxPooledFrame {
		f.buf = nil
	}
	f.size, f.close = 0, false
	framePool.Put(f)
}

// newFrame encodes one final frame carrying p.
func (c *Conn) newFrame(op ws.OpCode, p []byte) *frame {
	f := framePool.Get().(*frame)
	f.buf = appendHeader(f.buf[:0], op, int64(len(p)), c.opts.Client)
	start := len(f.buf)
	f.buf = append(f.buf, p...)
	if c.opts.Client {
		var mask [4]byte
		copy(mask[:], f.buf[start-4:start])
		ws.Cipher(f.buf[start:], mask, 0)
	}
	return f
}

// appendHeader appends a FIN frame header (RFC 6455 §5.2). A client frame gets a
// fresh masking key from the runtime's ChaCha8 generator (§5.3).
func appendHeader(b []byte, op ws.OpCode, n int64, masked bool) []byte {
	b = append(b, 0x80|byte(op))
	var maskBit byte
	if masked {
		maskBit = 0x80
	}
	switch {
	case n <= 125:
		b = append(b, maskBit|byte(n))
	case n <= 0xffff:
		b = append(b, maskBit|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, maskBit|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if masked {
		b = binary.BigEndian.AppendUint32(b, rand.Uint32())
	}
	return b
}

// Send queues one message as a single frame. p is copied, so the caller may reuse
// it at once. Send blocks while QueueBytes are queued, until ctx ends or the
// connection closes.
func (c *Conn) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	if c.closing.Load() {
		return ErrClosed
	}
	n := int64(len(p))
	if err := c.reserve(ctx, n); err != nil {
		return err
	}
	f := c.newFrame(op, p)
	f.size = n
	select {
	case c.data <- f:
		return nil
	case <-ctx.Done():
		c.release(n)
		putFrame(f)
		return ctx.Err()
	case <-c.done:
		putFrame(f)
		return ErrClosed
	}
}

// Ping queues a ping with payload p (at most 125 bytes). Pings are dropped rather
// than queued behind a full control queue: the heartbeat sends another.
func (c *Conn) Ping(p []byte) error {
	if c.closing.Load() {
		return ErrClosed
	}
	c.queueControl(ws.OpPing, p[:min(len(p), 125)])
	return nil
}

func (c *Conn) queueControl(op ws.OpCode, p []byte) {
	f := c.newFrame(op, p)
	select {
	case c.ctrl <- f:
	default:
		// Only a peer flooding pings fills this queue; answering the latest ones
		// is enough (RFC 6455 §5.5.3).
		putFrame(f)
	}
}

// reserve waits until n more bytes fit in the queue.
func (c *Conn) reserve(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		if c.queued == 0 || c.queued+n <= c.opts.QueueBytes {
			c.queued += n
			c.mu.Unlock()
			return nil
		}
		c.waiting = true
		wake := c.space
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrClosed
		}
	}
}

func (c *Conn) release(n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.queued -= n
	if c.waiting {
		close(c.space)
		c.space = make(chan struct{})
		c.waiting = false
	}
	c.mu.Unlock()
}

// Queued reports the bytes of data messages waiting to be written.
func (c *Conn) Queued() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// Close starts the closing handshake (RFC 6455 §7.1.2): data already queued is
// written, then a close frame with code and reason, then tether waits up to
// CloseWait for the peer's close before closing TCP. It does not block; Done is
// closed when it has finished. Later calls do nothing.
func (c *Conn) Close(code ws.StatusCode, reason string) {
	c.sendClose(code, reason)
}

func (c *Conn) sendClose(code ws.StatusCode, reason string) {
	if c.closing.Swap(true) {
		return
	}
	f := c.newFrame(ws.OpClose, closeBody(code, reason))
	f.close = true
	// A peer that stopped reading must not hold the close up for ever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.CloseWait))
	// The close frame has a queue of its own, so a data queue full of frames
	// for a slow peer neither blocks Close nor loses the backlog; closing.Swap
	// admits one close frame, so this send never blocks.
	c.closeq <- f
}

// closeBody builds a close payload, replacing codes that must never be sent
// (RFC 6455 §7.4.1) and cutting the reason to 123 bytes on a UTF-8 boundary.
func closeBody(code ws.StatusCode, reason string) []byte {
	if !validReceivedCode(code) {
		code = ws.StatusNormalClosure
	}
	if len(reason) > 123 {
		cut := 123
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
	return append(b, reason...)
}

// Err reports why the writer stopped, if it failed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeErr
}

// writeLoop is the only code that writes to the socket.
func (c *Conn) writeLoop() {
	defer close(c.done)
	w := bufio.NewWriterSize(c.nc, writeBufferSize)
	for {
		f, ok := c.next()
		if !ok {
			return
		}
		isClose := f.close
		if err := c.write(w, f); err != nil {
			c.failWrite(err)
			return
		}
		if isClose {
			c.finishClose()
			return
		}
	}
}

const writeBufferSize = 32 << 10

// next returns the next frame to write: control frames first, then data, and the
// close frame only once the data queued before it is written.
func (c *Conn) next() (*frame, bool) {
	select {
	case f := <-c.ctrl:
		return f, true
	default:
	}
	select {
	case f := <-c.data:
		return f, true
	default:
	}
	select {
	case f := <-c.ctrl:
		return f, true
	case f := <-c.data:
		return f, true
	case f := <-c.closeq:
		return c.beforeClose(f), true
	case <-c.quit:
		return nil, false
	}
}

// beforeClose returns a data frame that raced the close frame into its queue
// (select picks at random among ready cases), putting the close frame back.
func (c *Conn) beforeClose(closeFrame *frame) *frame {
	select {
	case f := <-c.data:
		c.closeq <- closeFrame
		return f
	default:
		return closeFrame
	}
}

// write writes f and flushes when nothing else is queued, so a backlog goes out
// in large writes and a lone message in one.
func (c *Conn) write(w *bufio.Writer, f *frame) error {
	if c.opts.WriteTimeout > 0 && w.Buffered() == 0 && !c.closing.Load() {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	}
	_, err := w.Write(f.buf)
	c.release(f.size)
	isClose := f.close
	putFrame(f)
	if err == nil && (isClose || (len(c.ctrl) == 0 && len(c.data) == 0)) {
		err = w.Flush()
	}
	return err
}

func (c *Conn) failWrite(err error) {
	c.mu.Lock()
	c.writeErr = err
	c.mu.Unlock()
	c.Abort()
}

// finishClose waits for the peer's close frame (or CloseWait), then closes TCP.
func (c *Conn) finishClose() {
	t := time.NewTimer(c.opts.CloseWait)
	defer t.Stop()
	select {
	case <-c.peerClose:
	case <-t.C:
	case <-c.quit:
	}
	c.Abort()
}
