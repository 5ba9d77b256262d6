package proxy

import (
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// upOut collects app messages for the live upstream connection while more
// wait in the app's read buffer, and queues them together: one lock on the
// connection's queue and one wake-up of its writer per burst, where a send
// per message took that lock, and could start the writer, once per message.
// A message that arrived as one whole frame
// goes as that frame, the app's masking key included (wsconn.Conn.Frame):
// tether neither encodes nor masks it again. The app reader passes the
// batch on before it waits for the app (ReadMessageFlushing), so no
// message is held while tether waits, and before any message that does
// not join it (route).
//
// Only plain messages join the batch: the protocol gave them no part to
// play (protocol.App's zero value: no login, subscription, acknowledgement
// or keepalive). What route does for one with a live connection is only to
// send it; the rest need route's bookkeeping on the connection they go to.
// A connection lost before the batch is queued refuses it whole, and its
// messages are routed again (takeBack), as the message of a refused Send
// is: to the outbox, or to a newer connection. A compressing connection
// gets its messages one by one, as before. The batch is the app reader's
// alone.
type upOut struct {
	b  sendq.Batch
	to *upstream.Conn // the connection the batch is for
}

// upBatchBytes passes a batch on once it holds this much, as outBatchBytes
// does towards the app.
const upBatchBytes = 16 << 10

// fromAppWhole is fromApp for a message the app reader read whole: a plain
// one joins the batch for the live connection, in its frame when it has
// one; any other takes fromApp's path.
func (sess *Session) fromAppWhole(op ws.OpCode, data []byte) {
	msg, ok := sess.classify(op, data)
	if !ok {
		return
	}
	m := &msg
	// Compared only when the protocol read it: the comparison of its
	// strings showed in the profile of every message.
	if sess.srv.rules.caps.ReadsApp && m.class != (protocol.App{}) {
		sess.route(m)
		return
	}
	// Decided under the lock that decides whether a connection is live,
	// like every other message: queued in the outbox when none is.
	live := sess.enqueueUnlessLive(m)
	if live == nil {
		return
	}
	u := &sess.up
	if u.to != live {
		sess.flushUp() // what an older connection's batch holds goes first
		u.to = live
	}
	if live.Compressed() {
		// Sent one by one, as before: a batch must hold the messages
		// as they were, to take them back from a lost connection
		// (takeBack).
		u.to = nil
		sess.sendOn(live, m)
		return
	}
	// Frame masks the payload again in place: data is not read after it.
	if f := sess.app.Frame(); f != nil {
		live.AppendFrame(&u.b, f)
	} else {
		live.Append(&u.b, op, data)
	}
	if u.b.Bytes() >= upBatchBytes {
		sess.flushUp()
	}
}

// flushUp queues the batch on the connection it is for, blocking while that
// connection's queue is full (back-pressure on app reads, as with Send).
func (sess *Session) flushUp() {
	u := &sess.up
	if u.b.Len() == 0 {
		return
	}
	to := u.to
	u.to = nil // a lost connection is not kept for the next burst
	if err := to.SendBatch(sess.ctx, &u.b); err != nil {
		sess.takeBack(to, err)
	}
}

// takeBack routes again the messages of a batch the connection lost
// refused, as route does a message whose Send failed: the session stops
// sending to lost, and they go to the outbox, or to a newer live
// connection, in their order. The batch holds them in frames whose
// payloads are as the app sent them (no connection a batch goes to
// compresses).
func (sess *Session) takeBack(lost *upstream.Conn, err error) {
	w, n := sess.up.b.Take()
	defer sendq.PutBuf(w)
	if sess.ctx.Err() != nil {
		return // the session is over: nothing is sent any more
	}
	sess.log.Debug("app messages not sent upstream, connection lost; routed again",
		zap.Uint64("gen", lost.Gen()), zap.Int("messages", n), zap.Error(err))
	sess.mu.Lock()
	if sess.live == lost {
		sess.live = nil
	}
	sess.mu.Unlock()
	for b := w.B; len(b) > 0; {
		var f []byte
		f, b = wsconn.NextFrame(b)
		op, p := wsconn.FrameMessage(f)
		sess.route(&appMessage{op: op, data: p})
	}
}
