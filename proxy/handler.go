package proxy

import (
	"context"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// Message forwards one upstream message to the app, unless a rule hides it
// (hide.go) or the sequence rules drop or hold it (sequencer.go). It blocks
// while the app's write queue is full: that is the back-pressure on
// upstream reads. With no rule configured, the message is not looked at.
func (sess *Session) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	rs := &sess.srv.rules
	switch {
	case rs.upstream:
		sess.messageRuled(c, op, data)
	case rs.seq.on:
		sess.sequenced(c.Gen(), op, data, false, nil)
	default:
		sess.forward(op, data)
	}
}

// messageRuled is Message under hiding rules: the message's top level is
// read once for them and for the sequence rules (ruleScan).
func (sess *Session) messageRuled(c *upstream.Conn, op ws.OpCode, data []byte) {
	rs := &sess.srv.rules
	var v ruleValues
	rs.upScan.read(data, &v)
	hidden := sess.hiddenIn(c, data, &v)
	switch {
	case rs.seq.on:
		sess.sequenced(c.Gen(), op, data, hidden, &v)
	case !hidden:
		sess.forward(op, data)
	}
}

// forward passes a message on to the app as it is.
func (sess *Session) forward(op ws.OpCode, data []byte) {
	if sess.waitApp() {
		sess.send(op, data)
	}
}

// Flush passes on the messages Message held back. The upstream reader calls
// it before it waits for the socket, and before it stops (upstream's
// flusher).
func (sess *Session) Flush(*upstream.Conn) {
	if !sess.srv.rules.seq.on {
		sess.flushOut()
		return
	}
	sq := &sess.seq
	sq.takeReaderTurn()
	sess.flushOut()
	sq.releaseReaderTurn()
}

// appOut collects the upstream messages for the app while more wait in the
// upstream read buffer, and queues them on the app socket together
// (wsconn.Batch): one lock on the socket's queue and one wake-up of its
// writer per burst, where a send per message fought the writer for that lock
// on every message. The upstream reader passes them on before it waits for
// the socket (Flush), so no message is held while tether waits, and any
// other deliverer (a gap timer, a catch-up) passes on everything at the end
// of its turn. An app socket that takes no batches gets each message at
// once.
type appOut struct {
	to       batchSender // nil when the app socket takes no batches
	resolved bool        // to was looked up: the app is set
	b        wsconn.Batch
}

// batchSender is an app socket that takes messages in batches.
type batchSender interface {
	Append(b *wsconn.Batch, op ws.OpCode, p []byte)
	SendBatch(ctx context.Context, b *wsconn.Batch) error
}

// outBatchBytes passes a batch on once it holds this much, so a long burst
// reaches the app's writer in pieces it can write while the rest is read,
// and the first message of a burst waits for little more than this much
// reading and sequencing.
const outBatchBytes = 16 << 10

// send passes one message on to the app once the app is set: into the batch,
// or straight to the socket. It returns false when the app is closing.
func (sess *Session) send(op ws.OpCode, p []byte) bool {
	o := &sess.seq.out
	if !o.resolved {
		o.to, _ = any(sess.app).(batchSender)
		o.resolved = true
	}
	if o.to == nil {
		if err := sess.app.Send(sess.ctx, op, p); err != nil {
			sess.log.Debug("upstream message not delivered, app is closing",
				zap.Int("bytes", len(p)), zap.Error(err))
			return false
		}
		sess.countMessage(DirectionUpstreamToApp)
		return true
	}
	o.to.Append(&o.b, op, p)
	if o.b.Bytes() >= outBatchBytes {
		return sess.flushOut()
	}
	return true
}

// flushOut queues what the batch holds on the app socket, blocking while the
// socket's queue is full. It returns false when the app is closing.
func (sess *Session) flushOut() bool {
	o := &sess.seq.out
	n, size := o.b.Len(), o.b.Bytes()
	if n == 0 {
		return true
	}
	if err := o.to.SendBatch(sess.ctx, &o.b); err != nil {
		sess.log.Debug("upstream messages not delivered, app is closing",
			zap.Int("messages", n), zap.Int64("bytes", size), zap.Error(err))
		return false
	}
	for range n {
		sess.countMessage(DirectionUpstreamToApp)
	}
	return true
}

// waitApp waits until the app socket is set, and reports false if the
// session ends first. Once the app is set, which is every message but the
// first few, it costs one non-blocking receive on a closed channel, which
// takes no lock; the two-case select it avoids locked both channels on
// every message.
func (sess *Session) waitApp() bool {
	select {
	case <-sess.appReady:
		return true
	default:
	}
	select {
	case <-sess.appReady:
		return true
	case <-sess.ctx.Done():
		return false
	}
}

// Lost stops direct sends to c; later app messages queue until the next Restore.
// A resume sent on c will not be answered any more: the gaps left to it are
// fetched over HTTP now.
func (sess *Session) Lost(c *upstream.Conn, err error) {
	var b *seqBatch
	sess.mu.Lock()
	if sess.live == c {
		sess.live = nil
	}
	sess.restore.lost(c)
	if sess.srv.rules.seq.on {
		b = &seqBatch{}
		sess.seqLostLocked(b, c.Gen())
	}
	sess.mu.Unlock()
	if b != nil {
		// Fetches and log lines only: no message is released, and without
		// the turn the session's batch is not this goroutine's to queue.
		sess.finish(b, false)
	}
}

// seqLostLocked forgets the resumes asked on connection gen and surfaces
// the duplicates not reported yet. sess.mu is held.
func (sess *Session) seqLostLocked(b *seqBatch, gen uint64) {
	sq := &sess.seq
	for stream, g := range sq.resumed {
		if g != gen {
			continue
		}
		delete(sq.resumed, stream)
		if gt := sq.gaps[stream]; gt != nil && gt.deferred && !sq.closed && !sq.failed {
			sess.undeferLocked(b, gt)
		}
	}
	if n := sq.dups.take(time.Now()); n > 0 {
		b.event(seqEvent{kind: evDuplicates, n: n})
	}
}
