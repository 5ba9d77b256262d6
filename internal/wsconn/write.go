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
	c.unlockQueued(true)
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

// wakeWriter makes the caller that queued the first bytes of a burst the
// writer (sendq.Options.Wake): the queue calls it with c.mu held, and the
// caller writes what is queued as it unlocks (unlockQueued, writeNow). So a
// reader forwarding a burst writes it on its own thread, as nginx does,
// where starting a writer goroutine per burst woke another thread for it.
// After Abort nothing is written any more.
func (c *Conn) wakeWriter() {
	if c.aborted {
		return
	}
	if c.w == nil {
		c.w = new(writer) // a Conn that never writes goes without
	}
	c.writing = true
	c.woken = true
}

// unlockQueued unlocks c.mu after queueing. When that queueing woke the
// writer, the caller is the writer now: it writes inline (writeNow), or
// starts the writer goroutine.
func (c *Conn) unlockQueued(inline bool) {
	woken := c.woken
	c.woken = false
	c.mu.Unlock()
	switch {
	case !woken:
	case inline:
		c.writeNow()
	default:
		go c.writeLoop()
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
	if c.q.Closed() {
		c.mu.Unlock()
		return
	}
	if c.ctrlFrames >= maxControlFrames {
		// Only a peer flooding pings fills this queue; answering the latest
		// ones is enough (RFC 6455 §5.5.3). Counted for the owner's log.
		c.ctrlDropped++
		c.mu.Unlock()
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
	// A pong is the reader's: it reads on while the writer goroutine writes,
	// so a peer flooding pings gets them answered a few at a time
	// (maxControlFrames), the rest dropped, not with a write from the reader
	// for every ping it reads. A ping is the heartbeat's, written inline.
	c.unlockQueued(op != ws.OpPong)
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
	// The close frame goes after everything queued, however much a slow peer
	// has left there, and nothing is queued after it.
	if !c.q.CloseLocked() {
		c.mu.Unlock()
		return // Abort came first: the socket is closed, the queue dropped
	}
	c.appendLocked(ws.OpClose, 0, body).Final = true
	c.q.WakeLocked()
	// A writer woken now finds only the close frame, and its CloseWait is
	// the goroutine's to wait.
	c.unlockQueued(false)
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

// writeLoop is the writer goroutine: started when a caller's inline write
// left something (writeNow), or when the socket cannot be written inline,
// it writes until nothing is queued, and exits. It closes done when it
// stops the connection (close frame written, or a write failed), and when
// it finds Abort was called while it ran.
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
// with it. What the writer took and did not write is counted in the
// queue's count too. Only the writer calls it, or Abort when there is none,
// so c.w is the caller's.
func (c *Conn) ended() {
	if c.w != nil {
		c.w.drop()
	}
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

// inlinePasses bounds how many times a caller writing inline takes the
// queue: what other goroutines queue while it writes is theirs, and after
// that many passes it goes to the writer goroutine, so the caller gets
// back to its own work (reading its socket) in bounded time.
const inlinePasses = 2

// writeNow runs on the caller whose queueing woke the writer: it is the
// writer now. It writes what is queued with writes that never wait
// (sendq.RawWriter), so the caller, often the reader of the other socket, goes on
// reading whatever this peer does. What the socket does not take at once
// goes to the writer goroutine, from the byte it stopped at: the rest of
// a partial write, a backlog behind a slow peer, the close frame and its
// CloseWait, all the writes of a socket without a descriptor (TLS).
func (c *Conn) writeNow() {
	if !c.w.probed {
		c.w.raw, c.w.probed = sendq.NewRawWriter(c.nc), true
	}
	if c.w.raw == nil {
		go c.writeLoop()
		return
	}
	ok, aborted := c.take()
	for pass := 0; ok; pass++ {
		if pass == inlinePasses {
			go c.writeLoop() // it writes what take took first
			return
		}
		switch c.flush(true) {
		case stalled:
			go c.writeLoop()
			return
		case stopped:
			c.ended()
			return
		}
		ok, aborted = c.take()
	}
	if aborted {
		c.ended() // Abort ran while c.writing: done is the writer's to close
	}
}

// drain writes the queue until it is empty, starting with what the writer
// holds already (what an inline write left). Each pass takes everything
// queued at once, so a backlog goes out in large writes and a lone message
// in one. It returns true when it found the queue empty and the connection
// not aborted, false once the writer must stop (close frame written, a
// write failed, or aborted).
func (c *Conn) drain() bool {
	for {
		if !c.w.holds() {
			ok, aborted := c.take()
			if !ok {
				return !aborted
			}
		}
		if c.flush(false) != flushed {
			return false
		}
	}
}

// writer is the writer's own state: what it took from the queue and has
// not written yet. Whoever set c.writing owns it (a caller writing inline,
// then the writer goroutine it started), so it needs no lock: c.writing
// changes hands under c.mu. It is made with the first writer (wakeWriter)
// and kept: a Conn that never writes, as most idle ones, goes without it,
// and the Conn stays in its size class.
type writer struct {
	ctrl *sendq.Buf   // control frames, written ahead of segs
	segs []*sendq.Buf // data segments in order; segs[:next] are written (nil)
	next int
	off  int // bytes written of the buffer being written: ctrl, or segs[next]
	// raw is the socket's inline write; probed once it was looked for,
	// nil after that when the socket has none.
	raw    *sendq.RawWriter
	probed bool
}

func (w *writer) holds() bool { return w.ctrl != nil || w.next < len(w.segs) }

// drop lets go of what the writer holds, for a connection that ended.
func (w *writer) drop() {
	if w.ctrl != nil {
		sendq.PutBuf(w.ctrl)
		w.ctrl = nil
	}
	for ; w.next < len(w.segs); w.next++ {
		sendq.PutBuf(w.segs[w.next])
		w.segs[w.next] = nil
	}
	w.off = 0
}

// take hands everything queued to the writer (c.w), which holds nothing,
// and gives the queue the writer's emptied segment list. When nothing is
// queued it marks the writer idle instead, so that the next Send makes a
// writer again, and returns false, with aborted telling whether Abort ran
// while the writer did.
func (c *Conn) take() (ok, aborted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctrl == nil && len(c.segs) == 0 {
		c.q.IdleLocked()
		c.writing = false
		return false, c.aborted
	}
	w := c.w
	w.ctrl, c.ctrl, c.ctrlFrames = c.ctrl, nil, 0
	w.segs, c.segs = c.segs, w.segs[:0]
	w.next, w.off = 0, 0
	return true, false
}

func (c *Conn) takeControl() *sendq.Buf {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctrl := c.ctrl
	c.ctrl, c.ctrlFrames = nil, 0
	return ctrl
}

// flushResult is what flush did with what the writer holds.
type flushResult int

const (
	flushed flushResult = iota // written, all of it
	stopped                    // the writer stops: a write failed, or the close frame is written
	stalled                    // an inline write left the rest, held, to the writer goroutine
)

// flush writes what the writer holds: control frames first, then the
// segments in order, control frames queued meanwhile going ahead of each
// next segment, so a ping or pong waits for one segment (64 KiB) at most.
// Inline (nb), it stalls at the first write the socket does not take whole,
// and before the close frame, whose CloseWait is the goroutine's to wait.
func (c *Conn) flush(nb bool) flushResult {
	w := c.w
	if r := c.writeControl(nb); r != flushed {
		return r
	}
	for w.next < len(w.segs) {
		if w.next > 0 && w.off == 0 {
			w.ctrl = c.takeControl()
			if r := c.writeControl(nb); r != flushed {
				return r
			}
		}
		if nb && w.segs[w.next].Final {
			return stalled
		}
		if r := c.writeSegment(nb); r != flushed {
			return r
		}
	}
	return flushed
}

// writeControl writes the control frames the writer holds, if any.
func (c *Conn) writeControl(nb bool) flushResult {
	ctrl := c.w.ctrl
	if ctrl == nil {
		return flushed
	}
	done, err := c.writeBuf(ctrl.B, nb)
	if !done {
		return stalled
	}
	c.w.ctrl = nil
	c.ctrlUnwritten.Add(-int64(len(ctrl.B)))
	sendq.PutBuf(ctrl)
	if err != nil {
		c.failWrite(err)
		return stopped
	}
	return flushed
}

// writeSegment writes the writer's next segment and frees its bytes in the
// queue.
func (c *Conn) writeSegment(nb bool) flushResult {
	w := c.w
	seg := w.segs[w.next]
	done, err := c.writeBuf(seg.B, nb)
	if !done {
		return stalled
	}
	w.segs[w.next] = nil
	w.next++
	if seg.Count > 0 {
		c.q.Release(seg.Count)
	}
	isClose := seg.Final
	sendq.PutBuf(seg)
	switch {
	case err != nil:
		c.failWrite(err)
		return stopped
	case isClose:
		c.finishClose()
		return stopped
	}
	return flushed
}

// writeBuf writes b from c.w.off on. The writer goroutine writes the rest
// whole or fails (writeOut). Inline (nb), one write that never waits:
// done is false, with c.w.off moved past what it wrote, when the socket
// took less than the rest, or could not be written at all (closed, a
// deadline passed), which the goroutine's own write then meets and
// reports. err is the failure of a write, done then true.
func (c *Conn) writeBuf(b []byte, nb bool) (done bool, err error) {
	w := c.w
	if !nb {
		err = c.writeOut(b[w.off:])
		w.off = 0
		return true, err
	}
	n, ok, err := w.raw.TryWrite(b[w.off:])
	if !ok {
		return false, nil
	}
	if err == nil && w.off+n < len(b) {
		w.off += n
		return false, nil
	}
	w.off = 0
	return true, err
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
