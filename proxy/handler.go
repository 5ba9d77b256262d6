package proxy

import (
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/upstream"
)

// upstreamHandler is the session as its upstream client sees it
// (upstream.Handler). Only the client's goroutines call it: its reader
// (Message, Flush), a restore goroutine per connection (Restore) and the
// client's own goroutine (Lost).
type upstreamHandler struct{ sess *Session }

// Message forwards one upstream message to the app, unless the protocol
// hides it (hidden) or the sequence rules drop or hold it (sequencer.go). It
// blocks while the app's write queue is full: that is the back-pressure on
// upstream reads. A protocol that reads no upstream message does not see it;
// one that frames its messages has each passed on alone (framing.go).
//
// A message forwarded unchanged, and not sequenced, goes to the app in the
// frame it arrived in (upstream.Conn.Frame), header included: the app
// reads the bytes the upstream wrote.
func (h upstreamHandler) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	if h.sess.srv.rules.caps.Framing != nil {
		h.split(c, op, data)
		return
	}
	h.message(c, op, data, c.Frame())
}

// message is Message for one protocol message; frame is the frame data
// arrived in, nil when it is not the whole of one.
func (h upstreamHandler) message(c *upstream.Conn, op ws.OpCode, data, frame []byte) {
	sess := h.sess
	rs := &sess.srv.rules
	if !rs.caps.ReadsUpstream {
		sess.forward(op, data, frame, c.EventID())
		return
	}
	u := rs.proto.Upstream(data)
	if u.LoginOK && rs.caps.Keepalive.Negotiate != nil {
		sess.mu.Lock()
		login := sess.state.Login()
		sess.mu.Unlock()
		if every, changed := sess.beat.negotiate(login, data); changed {
			sess.log.Debug("keepalive beats toward the app negotiated", zap.Duration("every", every))
		}
	}
	hidden, replied := sess.hiddenReply(c, data, &u)
	if replied != nil {
		h.replied(c, op, data, frame, replied, hidden, &u)
		return
	}
	h.deliver(c, op, data, frame, hidden, &u)
}

// deliver passes one upstream message on: through the sequencing, or to
// the app unless hidden.
func (h upstreamHandler) deliver(c *upstream.Conn, op ws.OpCode, data, frame []byte, hidden bool, u *protocol.Upstream) {
	sess := h.sess
	switch {
	case sess.seq != nil:
		u.Seq.EventID = c.EventID()
		sess.sequenced(c.Gen(), op, data, hidden, u.Seq)
	case !hidden:
		sess.forward(op, data, frame, c.EventID())
	}
}

// replied is message for a reply to a logged subscription r: what the
// protocol says it means besides itself (answer) replaces its sequence
// fields when it names any, and the messages it carries follow it, each
// read as an upstream message.
func (h upstreamHandler) replied(c *upstream.Conn, op ws.OpCode, data, frame []byte, r *protocol.Replied, hidden bool, u *protocol.Upstream) {
	sess := h.sess
	ans := sess.answer(c, data, r)
	if ans.Seq != (protocol.Fields{}) {
		u.Seq = ans.Seq
	}
	h.deliver(c, op, data, frame, hidden, u)
	for _, m := range ans.Messages {
		h.message(c, op, m, nil)
	}
	for _, m := range ans.Upstream {
		if err := c.Send(sess.ctx, op, m); err != nil {
			sess.log.Debug("message of tether's own not sent upstream, connection lost", zap.Uint64("gen", c.Gen()), zap.Error(err))
		}
	}
}

// answer asks the protocol what a reply to the logged subscription r means
// besides itself (Capabilities.Reply), and applies it to the session's
// protocol state.
func (sess *Session) answer(c *upstream.Conn, data []byte, r *protocol.Replied) protocol.Answer {
	a := sess.srv.rules.caps.Reply(data, r.Entry, r.Own)
	sess.mu.Lock()
	err := sess.state.Answered(r, a)
	sess.mu.Unlock()
	if err != nil {
		sess.log.Warn("subscription not rewritten from its reply, replayed as before", zap.Uint64("gen", genOf(c)), zap.Error(err))
	}
	if len(a.Messages) > 0 || len(a.Upstream) > 0 {
		sess.log.Debug("reply to a subscription read", zap.Uint64("gen", genOf(c)), zap.Bool("own", r.Own),
			zap.Int("messages", len(a.Messages)), zap.Int("upstream", len(a.Upstream)))
	}
	return a
}

// forward passes a message on to the app as it is, in frame when that is
// not nil; id is the SSE upstream's id for it, "" for none (sendID).
func (sess *Session) forward(op ws.OpCode, data, frame []byte, id string) {
	if !sess.waitApp() {
		return
	}
	if frame != nil && id == "" {
		sess.sendFrame(frame)
		return
	}
	sess.sendID(op, data, id)
}

// hidden applies what the protocol read in an upstream message from c to
// the session's protocol state, and reports whether the app must not see
// it: a second welcome, the reply to a request tether replayed, a repeated
// acknowledgement. The state the message carries (a login reply a restore
// waits for, an acknowledgement) is taken into account either way. Each
// hidden message is logged at debug and counted.
//
// c is nil for a message fetched over HTTP (TETHER_GAPFILL_URL): no login
// waits for it.
func (sess *Session) hidden(c *upstream.Conn, data []byte, u *protocol.Upstream) bool {
	hidden, _ := sess.hiddenReply(c, data, u)
	return hidden
}

// hiddenReply is hidden that also returns the logged subscription the
// message answers, when the protocol reads such replies
// (Capabilities.Reply).
func (sess *Session) hiddenReply(c *upstream.Conn, data []byte, u *protocol.Upstream) (bool, *protocol.Replied) {
	if !u.Hides() {
		return false, nil
	}
	gen := genOf(c)
	sess.mu.Lock()
	why, replied := sess.state.UpstreamReply(gen, *u)
	// Counted before the lock is let go: a login or replay reply wakes
	// the restore waiting for it inside UpstreamReply, and that restore
	// takes the lock before it counts itself restored. Counted after it,
	// whoever read n restores could miss the replies they hid.
	if why != protocol.Shown {
		sess.srv.totals.hidden(why)
	}
	sess.mu.Unlock()
	if sess.srv.rules.caps.Reply == nil {
		replied = nil
	}
	if why == protocol.Shown {
		return false, replied
	}
	sess.log.Debug("upstream message hidden from the app", zap.String("reason", why.String()),
		zap.Uint64("gen", gen), zap.Int("bytes", len(data)))
	return true, replied
}

// genOf is c's generation, 0 for nil (a message that came over HTTP).
func genOf(c *upstream.Conn) uint64 {
	if c == nil {
		return 0
	}
	return c.Gen()
}

// Flush passes on the messages Message held back. The upstream reader calls
// it before it waits for the socket, and before it stops. A sequencing
// session's batch belongs to the Sequencer's delivery turn, which the reader
// gives up here.
func (h upstreamHandler) Flush(*upstream.Conn) {
	sess := h.sess
	if sess.seq == nil {
		sess.flushOut()
		return
	}
	sess.seq.Flush()
}

// appOut collects the upstream messages for the app while more wait in the
// upstream read buffer, and queues them on the app socket together
// (sendq.Batch): one lock on the socket's queue and one wake-up of its
// writer per burst, where a send per message fought the writer for that lock
// on every message. The upstream reader passes them on before it waits for
// the socket (Flush), so no message is held while tether waits, and any
// other deliverer (a gap timer, a catch-up) passes on everything at the end
// of its turn. Every app socket takes batches (appConn).
//
// A session's appOut is its upstream reader's alone, or, with sequencing,
// the holder's of its Sequencer's delivery turn (the reader, a gap timer or
// a catch-up, through seqApp).
type appOut struct {
	b sendq.Batch
}

// outBatchBytes passes a batch on once it holds this much, so a long burst
// reaches the app's writer in pieces it can write while the rest is read,
// and the first message of a burst waits for little more than this much
// reading and sequencing.
const outBatchBytes = 16 << 10

// sendID passes one message on to the app, which is set: into the batch,
// which goes to the socket once it holds outBatchBytes. It returns false
// when the app is closing. id is the name the message's event carries for
// an sse:// app (transport.SSEApp.AppendID): an SSE upstream's own id, or
// the "<stream>:<seq>" sequencing gave it. Other apps have no ids, and ""
// is none.
func (sess *Session) sendID(op ws.OpCode, p []byte, id string) bool {
	o := &sess.out
	if id != "" && sess.sse != nil {
		sess.sse.AppendID(&o.b, op, p, id)
	} else {
		sess.app.Append(&o.b, op, p)
	}
	if o.b.Bytes() >= outBatchBytes {
		return sess.flushOut()
	}
	return true
}

// sendFrame is sendID for a message passed on in the frame it arrived in.
func (sess *Session) sendFrame(frame []byte) bool {
	o := &sess.out
	sess.app.AppendFrame(&o.b, frame)
	if o.b.Bytes() >= outBatchBytes {
		return sess.flushOut()
	}
	return true
}

// flushOut queues what the batch holds on the app socket, blocking while the
// socket's queue is full. It returns false when the app is closing.
func (sess *Session) flushOut() bool {
	o := &sess.out
	n, size := o.b.Len(), o.b.Bytes()
	if n == 0 {
		return true
	}
	queued, err := sess.app.SendBatch(sess.ctx, &o.b)
	if queued > 0 {
		sess.beat.sent()
		sess.srv.countMessages(sess.kind, labels.DirectionUpstreamToApp, queued)
	}
	if err != nil {
		sess.log.Debug("upstream messages not delivered, app is closing",
			zap.Int("messages", n-queued), zap.Int("batch_messages", n), zap.Int64("batch_bytes", size), zap.Error(err))
		return false
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
// The app keepalives c never answered are answered, and the at-most-once
// operations in flight on it are reported to the app.
// A resume sent on c will not be answered any more: the Sequencer fetches
// the gaps left to it over HTTP now.
func (h upstreamHandler) Lost(c *upstream.Conn, err error) {
	sess := h.sess
	sess.mu.Lock()
	if sess.live == c {
		sess.live = nil
	}
	if sess.snapped == c {
		sess.snapped = nil
	}
	abandoned := sess.state.Lost(c.Gen())
	pings := sess.state.Unanswered(c.Gen())
	sess.mu.Unlock()
	if sess.seq != nil {
		sess.seq.Lost(c.Gen())
	}
	sess.answerUnanswered(c.Gen(), pings)
	sess.abandon(c.Gen(), abandoned)
}

// abandon tells the app that the at-most-once operations in flight on the
// lost connection gen will not run again (protocol.App.AtMostOnce): each
// gets the protocol's own message for it (Capabilities.Abandoned). The
// connection's reader has stopped, so nothing it read follows these.
func (sess *Session) abandon(gen uint64, lost []protocol.Entry) {
	if len(lost) == 0 {
		return
	}
	sess.srv.totals.abandoned.Add(uint64(len(lost)))
	sess.log.Info("operations in flight on a lost connection not run again; the app is told",
		zap.Uint64("gen", gen), zap.Int("operations", len(lost)))
	for _, e := range lost {
		sess.toApp("lost operation reported to the app", sess.srv.rules.caps.Abandoned(e))
	}
}
