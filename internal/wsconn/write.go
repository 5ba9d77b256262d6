package wsconn

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// Send queues one message as a single frame. p is copied, so the caller may reuse
// it at once. Send blocks while QueueBytes are queued, until ctx ends or the
// connection closes.
func (c *Conn) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	n := int64(len(p))
	if err := c.lockRoom(ctx, n); err != nil {
		return err
	}
	c.queued += n
	c.appendLocked(op, p).data += n
	c.kickLocked()
	c.mu.Unlock()
	return nil
}

// lockRoom waits until n more bytes of data may be queued, and returns with c.mu
// held; or, with c.mu not held, the error that ends the wait. An empty queue takes
// any n, so one message larger than QueueBytes still goes through.
func (c *Conn) lockRoom(ctx context.Context, n int64) error {
	for {
		if c.closing.Load() {
			return ErrClosed
		}
		c.mu.Lock()
		if c.closeQueued {
			c.mu.Unlock()
			return ErrClosed
		}
		if c.queued == 0 || c.queued+n <= c.opts.QueueBytes {
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

// appendLocked encodes a frame carrying p at the end of the queue and returns
// the segment holding it. c.mu is held.
func (c *Conn) appendLocked(op ws.OpCode, p []byte) *wbuf {
	var w *wbuf
	if k := len(c.segs); k > 0 {
		last := c.segs[k-1]
		if len(last.b) == 0 || len(last.b)+len(p)+ws.MaxHeaderSize <= segmentBytes {
			w = last
		}
	}
	if w == nil {
		w = getWbuf()
		c.segs = append(c.segs, w)
	}
	w.b = c.appendFrame(w.b, op, p)
	return w
}

// appendFrame appends one final frame carrying p, masked on the client side.
func (c *Conn) appendFrame(b []byte, op ws.OpCode, p []byte) []byte {
	b = appendHeader(b, op, int64(len(p)), c.opts.Client)
	start := len(b)
	b = append(b, p...)
	if c.opts.Client {
		var mask [4]byte
		copy(mask[:], b[start-4:start])
		ws.Cipher(b[start:], mask, 0)
	}
	return b
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

// kickLocked wakes the writer goroutine unless a writer is already at work: the
// writer takes everything queued when it looks again. c.mu is held.
func (c *Conn) kickLocked() {
	if c.active {
		return
	}
	c.active = true
	select {
	case c.wake <- struct{}{}:
	default:
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

// maxControlFrames bounds the control frames waiting to be written.
const maxControlFrames = 4

// queueControl queues a ping or pong ahead of the queued data. Nothing follows
// a close frame (RFC 6455 §5.5.1), so control frames are dropped once it is
// queued.
func (c *Conn) queueControl(op ws.OpCode, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeQueued || c.ctrlFrames >= maxControlFrames {
		// Only a peer flooding pings fills this queue; answering the latest
		// ones is enough (RFC 6455 §5.5.3).
		return
	}
	if c.ctrl == nil {
		c.ctrl = getWbuf()
	}
	c.ctrl.b = c.appendFrame(c.ctrl.b, op, p)
	c.ctrlFrames++
	c.kickLocked()
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
	// A peer that stopped reading must not hold the close up for ever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.CloseWait))
	body := closeBody(code, reason)
	c.mu.Lock()
	defer c.mu.Unlock()
	// The close frame goes after everything queued, however much a slow peer
	// has left there, and nothing is queued after it.
	c.closeQueued = true
	c.appendLocked(ws.OpClose, body).close = true
	c.kickLocked()
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

// writeLoop is the writer goroutine: woken when something is queued, it writes
// until nothing is.
func (c *Conn) writeLoop() {
	defer close(c.done)
	var batch []*wbuf
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		var ok bool
		if batch, ok = c.drain(batch); !ok {
			return
		}
	}
}

// drain writes the queue until it is empty. Each pass takes everything queued
// at once, so a backlog goes out in large writes and a lone message in one;
// segments bound each write so a control frame waits for one segment at most.
// It returns the emptied segment list to reuse, and false once the writer must
// stop (close frame written, or a write failed).
func (c *Conn) drain(batch []*wbuf) ([]*wbuf, bool) {
	for {
		ctrl, segs, ok := c.take(batch[:0])
		if !ok {
			return batch, true
		}
		if !c.writeControl(ctrl) {
			return segs[:0], false
		}
		for i, w := range segs {
			segs[i] = nil
			if i > 0 && !c.writeControl(c.takeControl()) {
				putWbuf(w)
				return segs[:0], false
			}
			if !c.writeSegment(w) {
				return segs[:0], false
			}
		}
		batch = segs
	}
}

// take swaps the queue for the writer's emptied list. When nothing is queued it
// marks the writer idle, so the next Send wakes it, and returns false.
func (c *Conn) take(empty []*wbuf) (*wbuf, []*wbuf, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctrl == nil && len(c.segs) == 0 {
		c.active = false
		return nil, nil, false
	}
	ctrl, segs := c.ctrl, c.segs
	c.ctrl, c.ctrlFrames, c.segs = nil, 0, empty
	return ctrl, segs, true
}

func (c *Conn) takeControl() *wbuf {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctrl := c.ctrl
	c.ctrl, c.ctrlFrames = nil, 0
	return ctrl
}

// writeControl writes queued control frames, if any.
func (c *Conn) writeControl(ctrl *wbuf) bool {
	if ctrl == nil {
		return true
	}
	err := c.writeOut(ctrl.b)
	putWbuf(ctrl)
	if err != nil {
		c.failWrite(err)
		return false
	}
	return true
}

// writeSegment writes one segment and frees its bytes in the queue.
func (c *Conn) writeSegment(w *wbuf) bool {
	err := c.writeOut(w.b)
	c.release(w.data)
	isClose := w.close
	putWbuf(w)
	switch {
	case err != nil:
		c.failWrite(err)
		return false
	case isClose:
		c.finishClose()
		return false
	}
	return true
}

// writeOut writes b whole, within WriteTimeout when one is set. Once closing,
// the deadline Close set stays in force instead.
func (c *Conn) writeOut(b []byte) error {
	if c.opts.WriteTimeout > 0 && !c.closing.Load() {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	}
	_, err := c.nc.Write(b)
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
