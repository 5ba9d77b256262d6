package wsconn

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
)

// Send queues one message as a single frame. p is copied, so the caller may reuse
// it at once. Send blocks while QueueBytes are queued, until ctx ends or the
// connection closes.
//
// With Deflate.Compress, a data message of at least CompressMinBytes is
// compressed first, on the caller's goroutine and outside the lock, and
// sent so when that makes it smaller; the queue counts its compressed
// size.
func (c *Conn) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	if c.compresses(len(p)) && (op == ws.OpText || op == ws.OpBinary) {
		if z := compress(p); z != nil {
			defer z.release()
			return c.send(ctx, op, rsv1, z.b)
		}
	}
	return c.send(ctx, op, 0, p)
}

// send queues one frame with the RSV bits rsv carrying p.
func (c *Conn) send(ctx context.Context, op ws.OpCode, rsv byte, p []byte) error {
	n := int64(len(p))
	if err := c.q.Reserve(ctx, n); err != nil {
		return err
	}
	c.appendLocked(op, rsv, p).Count += n
	c.q.AddLocked(n)
	c.mu.Unlock()
	return nil
}

// appendLocked encodes a frame carrying p, with the RSV bits rsv, at the end
// of the queue and returns the segment holding it. c.mu is held.
func (c *Conn) appendLocked(op ws.OpCode, rsv byte, p []byte) *sendq.Buf {
	var w *sendq.Buf
	if k := len(c.segs); k > 0 {
		last := c.segs[k-1]
		if len(last.B) == 0 || len(last.B)+len(p)+ws.MaxHeaderSize <= sendq.BufBytes {
			w = last
		}
	}
	if w == nil {
		w = sendq.GetBuf()
		c.segs = append(c.segs, w)
	}
	w.B = c.appendFrame(w.B, op, rsv, p)
	return w
}

// appendFrame appends one final frame carrying p, masked on the client side,
// with the RSV bits rsv (RSV1: compressed).
func (c *Conn) appendFrame(b []byte, op ws.OpCode, rsv byte, p []byte) []byte {
	b = appendHeader(b, op, rsv, int64(len(p)), c.opts.Client)
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
func appendHeader(b []byte, op ws.OpCode, rsv byte, n int64, masked bool) []byte {
	b = append(b, 0x80|rsv<<4|byte(op))
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

// wakeWriter starts the writer goroutine (sendq.Options.Wake): the queue
// calls it with c.mu held, once per burst, and the writer takes everything
// queued when it looks, until it finds nothing and exits. Starting a
// goroutine costs about what waking a parked one does, and a connection
// between bursts, which is most of tether's connections most of the time,
// then holds no writer stack. After Abort nothing is written any more.
func (c *Conn) wakeWriter() {
	if c.aborted {
		return
	}
	c.writing = true
	go c.writeLoop()
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
	if c.q.Closed() {
		return
	}
	if c.ctrlFrames >= maxControlFrames {
		// Only a peer flooding pings fills this queue; answering the latest
		// ones is enough (RFC 6455 §5.5.3). Counted for the owner's log.
		c.ctrlDropped++
		return
	}
	if c.ctrl == nil {
		c.ctrl = sendq.GetBuf()
	}
	before := len(c.ctrl.B)
	c.ctrl.B = c.appendFrame(c.ctrl.B, op, 0, p)
	c.ctrlUnwritten.Add(int64(len(c.ctrl.B) - before))
	c.ctrlFrames++
	c.q.WakeLocked()
}

// ControlDropped reports the pongs (and pings) not queued because control
// frames came faster than the writer wrote them: a peer flooding pings.
func (c *Conn) ControlDropped() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctrlDropped
}

// Queued reports the bytes of data messages waiting to be written.
func (c *Conn) Queued() int64 { return c.q.Queued() }

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
	if !c.q.CloseLocked() {
		return // Abort came first: the socket is closed, the queue dropped
	}
	c.appendLocked(ws.OpClose, 0, body).Final = true
	c.q.WakeLocked()
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

// writeLoop is the writer goroutine: started when something is queued, it
// writes until nothing is, and exits. It closes done when it stops the
// connection (close frame written, or a write failed), and when it finds
// Abort was called while it ran.
func (c *Conn) writeLoop() {
	if !c.drain() {
		c.ended() // Abort ran while c.writing: done is the writer's to close
	}
}

// ended lets go of what is still queued and closes done: the connection is
// over (Abort has run, so the queue is closed and nothing joins it after).
// The queued bytes go back to Options.Account at once: an upstream session
// replaces a lost connection with a new one on the same account, and what
// the lost one never wrote, nor what its reader held, must not stay counted
// with it. The writer's own list is not here (drain dropped it), but its
// count is in the queue's.
func (c *Conn) ended() {
	c.dropQueued()
	c.held.end() // the reader's buffers too, whether or not it reads again
	c.closeDone()
}

func (c *Conn) dropQueued() {
	c.mu.Lock()
	segs, ctrl := c.segs, c.ctrl
	c.segs, c.ctrl, c.ctrlFrames = nil, nil, 0
	c.q.SetQueuedLocked(0)
	c.mu.Unlock()
	for _, w := range segs {
		sendq.PutBuf(w)
	}
	if ctrl != nil {
		sendq.PutBuf(ctrl)
	}
}

// drain writes the queue until it is empty. Each pass takes everything queued
// at once, so a backlog goes out in large writes and a lone message in one;
// segments bound each write so a control frame waits for one segment at most.
// It returns true when it found the queue empty and the connection not
// aborted, false once the writer must stop (close frame written, a write
// failed, or aborted).
func (c *Conn) drain() bool {
	var written []*sendq.Buf
	for {
		ctrl, segs, ok, aborted := c.take(written)
		if !ok {
			return !aborted
		}
		if !c.writeControl(ctrl) {
			return false
		}
		for i, w := range segs {
			segs[i] = nil
			if i > 0 && !c.writeControl(c.takeControl()) {
				sendq.PutBuf(w)
				return false
			}
			if !c.writeSegment(w) {
				return false
			}
		}
		written = segs
	}
}

// take swaps the queue for the writer's emptied list (written, or the one
// kept from its last run). When nothing is queued it marks the writer idle,
// so the next Send starts it again, keeps the list, and returns false, with
// aborted telling whether Abort ran while the writer did.
func (c *Conn) take(written []*sendq.Buf) (ctrl *sendq.Buf, segs []*sendq.Buf, ok, aborted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if written == nil {
		written, c.spare = c.spare, nil
	}
	if c.ctrl == nil && len(c.segs) == 0 {
		c.spare = written[:0]
		c.q.IdleLocked()
		c.writing = false
		return nil, nil, false, c.aborted
	}
	ctrl, segs = c.ctrl, c.segs
	c.ctrl, c.ctrlFrames, c.segs = nil, 0, written[:0]
	return ctrl, segs, true, false
}

func (c *Conn) takeControl() *sendq.Buf {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctrl := c.ctrl
	c.ctrl, c.ctrlFrames = nil, 0
	return ctrl
}

// writeControl writes queued control frames, if any.
func (c *Conn) writeControl(ctrl *sendq.Buf) bool {
	if ctrl == nil {
		return true
	}
	err := c.writeOut(ctrl.B)
	c.ctrlUnwritten.Add(-int64(len(ctrl.B)))
	sendq.PutBuf(ctrl)
	if err != nil {
		c.failWrite(err)
		return false
	}
	return true
}

// writeSegment writes one segment and frees its bytes in the queue.
func (c *Conn) writeSegment(w *sendq.Buf) bool {
	err := c.writeOut(w.B)
	if w.Count > 0 {
		c.q.Release(w.Count)
	}
	isClose := w.Final
	sendq.PutBuf(w)
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
	case <-c.closeWoken():
	case <-t.C:
	}
	c.Abort()
}
