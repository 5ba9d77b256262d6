package wsconn

import (
	"context"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
)

// Append encodes one message as a single frame at the end of b, for this
// Conn (masked or not as its frames are). p is copied, so the caller may
// reuse it at once. It compresses what Send would (Deflate.Compress), on
// the caller's goroutine, so a message is encoded the same whichever way
// it is queued; the batch then counts its compressed size.
func (c *Conn) Append(b *sendq.Batch, op ws.OpCode, p []byte) {
	w := b.Add()
	if c.compresses(len(p)) && (op == ws.OpText || op == ws.OpBinary) {
		if z := compress(p); z != nil {
			w.B = c.appendFrame(w.B, op, rsv1, z.b)
			w.Count += int64(len(z.b))
			z.release()
			return
		}
	}
	w.B = c.appendFrame(w.B, op, 0, p)
	w.Count += int64(len(p))
}

// SendBatch queues the messages of b after everything queued before, and
// empties b. Like Send, it blocks while QueueBytes are queued (an empty queue
// takes a batch of any size), until ctx ends or the connection closes. It
// returns how many messages it queued: all of b's, or none with the error,
// the batch's messages then dropped.
func (c *Conn) SendBatch(ctx context.Context, b *sendq.Batch) (int, error) {
	w, msgs := b.Take()
	if w == nil {
		return 0, nil
	}
	n := w.Count
	if err := c.q.Reserve(ctx, n); err != nil {
		sendq.PutBuf(w)
		return 0, err
	}
	c.queueLocked(w)
	c.q.AddLocked(n)
	c.unlockQueued(true)
	return msgs, nil
}

// QueueBatch is SendBatch for a caller that keeps what could not be
// queued: it queues all of b's messages and empties b, or, with the error,
// none, b still holding them for the caller to send elsewhere or drop. The
// upstream side uses it: app messages a lost connection refused go to the
// session's outbox instead.
func (c *Conn) QueueBatch(ctx context.Context, b *sendq.Batch) error {
	n := b.Bytes()
	if b.Len() == 0 {
		return nil
	}
	if err := c.q.Reserve(ctx, n); err != nil {
		return err
	}
	w, _ := b.Take()
	c.queueLocked(w)
	c.q.AddLocked(n)
	c.unlockQueued(true)
	return nil
}

// queueLocked adds the frames of w at the end of the queue: copied into the
// last segment when they fit in it, so a trickle of small batches is still
// written in large writes, or as a segment of their own. c.mu is held.
func (c *Conn) queueLocked(w *sendq.Buf) {
	if k := len(c.segs); k > 0 {
		last := c.segs[k-1]
		if len(last.B)+len(w.B) <= sendq.BufBytes {
			last.B = append(last.B, w.B...)
			last.Count += w.Count
			sendq.PutBuf(w)
			return
		}
	}
	c.segs = append(c.segs, w)
}
