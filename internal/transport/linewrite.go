package transport

import (
	"bytes"
	"context"
	"encoding/base64"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/sendq"
)

// lineEncoding is how an upstream message becomes a line.
type lineEncoding int

const (
	encRaw    lineEncoding = iota // text without a line break, as is
	encSpaces                     // text whose CR and LF become spaces
	encBase64                     // a binary message, base64-encoded
)

// Send queues one upstream message as a line. It blocks while QueueBytes
// are queued, until ctx ends or the connection closes. A message the
// policies drop returns nil; one whose policy closes the app returns
// ErrLineClosed, as does any Send once the app is closing.
func (c *LineConn) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	var b sendq.Batch
	c.Append(&b, op, p)
	if b.Len() == 0 {
		if c.q.Closed() {
			return ErrLineClosed // closing already, or by the message's policy
		}
		return nil // dropped by policy
	}
	_, err := c.SendBatch(ctx, &b)
	return err
}

// Append encodes one upstream message as a line at the end of b, applying
// the binary and newline policies first: a message they drop is counted and
// logged, and not added. One whose policy closes the app closes it, after
// queueing what b held before it (closeAfter). Nothing is added, or
// dropped, once the app is closing.
func (c *LineConn) Append(b *sendq.Batch, op ws.OpCode, p []byte) {
	if c.q.Closed() {
		return // before the policies: nothing is dropped twice
	}
	enc, ok := c.shape(b, op, p)
	if !ok {
		return
	}
	w := b.Add()
	at := len(w.B)
	w.B = appendLine(w.B, enc, p)
	w.Count += int64(len(w.B) - at)
}

// SendBatch queues the lines of b after everything queued before, and
// empties b. It blocks while QueueBytes are queued (an empty queue takes a
// batch of any size), until ctx ends or the connection closes. It returns
// how many lines it queued: all of b's, or none with the error.
func (c *LineConn) SendBatch(ctx context.Context, b *sendq.Batch) (int, error) {
	w, n := b.Take()
	if w == nil {
		return 0, nil
	}
	defer sendq.PutBuf(w)
	if err := c.q.Reserve(ctx, w.Count); err != nil {
		return 0, err
	}
	c.out = append(c.out, w.B...)
	c.q.AddLocked(w.Count)
	c.unlockQueued(true)
	for range n {
		c.opts.Delivered()
	}
	return n, nil
}

// shape applies the binary and newline policies. ok is false when the
// message is not written: dropped, or the app is being closed.
func (c *LineConn) shape(b *sendq.Batch, op ws.OpCode, p []byte) (enc lineEncoding, ok bool) {
	if op == ws.OpBinary {
		switch c.opts.Binary {
		case BinaryBase64:
			return encBase64, true
		case BinaryDrop:
			c.dropped(DropBinary, len(p))
			return 0, false
		}
		c.opts.Dropped(DropBinary)
		c.closeAfter(b, ws.StatusUnsupportedData, "binary message on a tcp:// listener (TETHER_TCP_BINARY=close)")
		return 0, false
	}
	if bytes.IndexByte(p, '\n') < 0 && bytes.IndexByte(p, '\r') < 0 {
		return encRaw, true
	}
	switch c.opts.Newline {
	case NewlineSpace:
		return encSpaces, true
	case NewlineDrop:
		c.dropped(DropNewline, len(p))
		return 0, false
	}
	c.opts.Dropped(DropNewline)
	c.closeAfter(b, ws.StatusUnsupportedData, "text message with a line break on a tcp:// listener (TETHER_TCP_NEWLINE=close)")
	return 0, false
}

// closeAfter closes the app for a policy, after queueing the lines b holds:
// they came before the message the policy refused, and sent one by one
// they would be queued already. They are queued past QueueBytes if need
// be, as the close comes after whatever is queued; a batch is small
// (the session passes one on at 16 KiB).
func (c *LineConn) closeAfter(b *sendq.Batch, code ws.StatusCode, reason string) {
	if w, n := b.Take(); w != nil {
		c.mu.Lock()
		queued := !c.q.Closed()
		if queued {
			c.out = append(c.out, w.B...)
			c.q.AddLocked(w.Count)
		}
		c.unlockQueued(true)
		sendq.PutBuf(w)
		for i := 0; queued && i < n; i++ {
			c.opts.Delivered()
		}
	}
	c.Close(code, reason)
}

// dropped counts and logs a message a drop policy kept from the app. The
// first drop of each kind is a warning naming the policy; later ones are
// counted and logged at debug, so a binary feed cannot flood the log.
func (c *LineConn) dropped(reason string, n int) {
	c.opts.Dropped(reason)
	i, policy := 0, c.opts.Binary.String()
	if reason == DropNewline {
		i, policy = 1, c.opts.Newline.String()
	}
	fields := []zap.Field{zap.String("reason", reason), zap.String("policy", policy), zap.Int("bytes", n)}
	if c.warned[i].CompareAndSwap(false, true) {
		c.opts.Log.Warn("upstream message dropped for the tcp app by policy (later drops are logged at debug)", fields...)
		return
	}
	c.opts.Log.Debug("upstream message dropped for the tcp app by policy", fields...)
}

// appendLine appends p encoded as one line.
func appendLine(b []byte, enc lineEncoding, p []byte) []byte {
	switch enc {
	case encBase64:
		b = base64.StdEncoding.AppendEncode(b, p)
	case encSpaces:
		at := len(b)
		b = append(b, p...)
		for i, c := range b[at:] {
			if c == '\n' || c == '\r' {
				b[at+i] = ' '
			}
		}
	default:
		b = append(b, p...)
	}
	return append(b, '\n')
}

// wakeWriter makes the caller that queued a burst for an idle writer the
// writer (sendq.Options.Wake; c.mu is held): it writes as it unlocks
// (unlockQueued). So the session's upstream reader writes a burst on its
// own thread, where a wake-up of the writer goroutine woke another thread
// for it.
func (c *LineConn) wakeWriter() { c.woken = true }

// unlockQueued unlocks c.mu after queueing. When that queueing woke the
// writer, the caller is the writer now: it writes inline (writeNow), or
// wakes the writer goroutine.
func (c *LineConn) unlockQueued(inline bool) {
	woken := c.woken
	c.woken = false
	c.mu.Unlock()
	switch {
	case !woken:
	case inline:
		c.writeNow()
	default:
		c.kick()
	}
}

// kick hands the writer's part to the writer goroutine.
func (c *LineConn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Queued reports the bytes of lines waiting to be written.
func (c *LineConn) Queued() int64 { return c.q.Queued() }

// inlinePasses bounds how many times a caller writing inline takes the
// queue, as wsconn's does: what others queue meanwhile is theirs, and the
// caller gets back to reading its own socket in bounded time.
const inlinePasses = 2

// writeNow runs on the caller whose queueing woke the writer: it is the
// writer now. It writes what is queued with writes that never wait, so the
// caller (the session's upstream reader) never parks on an app that reads
// slowly. The rest of a buffer the socket did not take whole, what is
// still queued after inlinePasses, the close (its CloseWait), and every
// write of a socket without a descriptor go to the writer goroutine.
func (c *LineConn) writeNow() {
	if !c.probed {
		c.raw, c.probed = sendq.NewRawWriter(c.nc), true
	}
	if c.raw == nil {
		c.kick()
		return
	}
	for pass := 0; ; pass++ {
		b, closing := c.take()
		switch {
		case b == nil && closing:
			c.kick() // the goroutine finishes the close
			return
		case b == nil:
			return
		case pass == inlinePasses:
			c.pend, c.pendOff = b, 0
			c.kick()
			return
		}
		n, ok, err := c.raw.TryWrite(b)
		switch {
		case err != nil:
			c.written(b)
			c.writeFailed(err)
			return
		case !ok || n < len(b):
			c.pend, c.pendOff = b, n
			c.kick()
			return
		}
		c.written(b)
	}
}

// writeLoop is the writer goroutine: kicked when an inline write left
// something, or to finish the close, it writes until nothing is queued.
func (c *LineConn) writeLoop() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		if !c.drain() {
			return
		}
	}
}

// drain writes the queue until it is empty, starting with what an inline
// write left, each pass taking all of it. It returns false once the writer
// must stop: the close finished or a write failed.
func (c *LineConn) drain() bool {
	for {
		b, off := c.pend, c.pendOff
		c.pend, c.pendOff = nil, 0
		if b == nil {
			var closing bool
			if b, closing = c.take(); b == nil {
				if closing {
					c.finishClose()
					return false
				}
				return true
			}
		}
		_, err := c.nc.Write(b[off:])
		c.written(b)
		if err != nil {
			c.writeFailed(err)
			return false
		}
	}
}

func (c *LineConn) writeFailed(err error) {
	c.opts.Log.Debug("write to tcp app failed", zap.Error(err))
	c.Abort()
}

// take swaps the queue for the spare buffer. With nothing queued it marks
// the writer idle and reports whether the app is closing.
func (c *LineConn) take() (b []byte, closing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 {
		c.q.IdleLocked()
		return nil, c.q.Closed()
	}
	b = c.out
	c.out, c.spare = c.spare[:0], nil
	return b, false
}

// written frees b's bytes in the queue, keeps b for reuse unless a backlog
// grew it large, and wakes a blocked Send.
func (c *LineConn) written(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cap(b) <= maxRetainedLineBuffer {
		c.spare = b[:0]
	}
	c.q.ReleaseLocked(int64(len(b)))
}
