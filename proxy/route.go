package proxy

import (
	"slices"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/upstream"
)

// appMessage is one app message on its way upstream, classified once.
type appMessage struct {
	op         ws.OpCode
	data       []byte // the reader's buffer: valid during fromApp only
	class      protocol.App
	ref        uint64         // the protocol state's reference, once remembered
	remembered bool           // remember has run
	epoch      uint64         // the session's restore epoch when it was remembered
	copy       buffer.Message // data cloned once, when something keeps it
}

// stored returns the message as the session's stores keep it, cloning the
// payload the first time.
func (m *appMessage) stored() buffer.Message {
	if m.copy.Data == nil {
		m.copy = buffer.Message{Binary: m.op == ws.OpBinary, Data: slices.Clone(m.data), ID: m.class.AckID}
		if m.copy.Data == nil {
			m.copy.Data = []byte{}
		}
	}
	c := m.copy
	if m.class.Restorable() {
		c.Ref = m.ref
	}
	return c
}

// remember records a login or (un)subscribe message in the session's
// protocol state, once, in the session's restore epoch (down: no
// connection is live or being restored). It returns
// buffer.ErrReplayLogFull when the log cannot keep it. Session.mu is held.
func (m *appMessage) remember(st *protocol.State, epoch uint64, down bool) error {
	if !m.class.Restorable() || m.remembered {
		return nil
	}
	m.remembered = true
	m.epoch = epoch
	if down && !st.Fold(m.class, m.stored()) {
		return buffer.ErrReplayLogFull // the requests it folds away are replayed too
	}
	ref, err := st.Remember(m.class, m.stored())
	m.ref = ref
	return err
}

// covered reports whether a restore snapshot taken since m was remembered
// (the session's restore epoch is now epoch) holds it: the connection it
// restores has it, or will, and it must not be sent or queued again.
// Session.mu is held.
func (m *appMessage) covered(epoch uint64) bool {
	return m.class.Restorable() && m.epoch != epoch
}

// sending prepares m for a direct send on live: an acknowledged message
// becomes pending (under the outbox caps and overflow policy), and the reply
// to a restorable one is the app's. sent is false when the message must not
// be sent: the caps refused or dropped it. Session.mu is held.
func (m *appMessage) sending(st *protocol.State, live *upstream.Conn) (dropped []buffer.Message, sent bool, err error) {
	if m.class.Restorable() {
		st.SentLive(m.class, m.ref, live.Gen())
	}
	pending := st.Pending()
	if m.class.AckID == "" || pending == nil {
		return nil, true, nil
	}
	dropped, err = pending.Add(m.stored(), live.Gen())
	return dropped, err == nil && pending.Has(m.class.AckID), err
}

// replayLogFull closes the app with 1013: the subscription it just sent
// cannot be kept for replay, and replaying a partial set after the next
// reconnect would lose its streams silently.
func (sess *Session) replayLogFull() {
	sess.srv.totals.replayLogFull.Add(1)
	sess.log.Warn("replay log full, closing app",
		zap.Int("max_messages", sess.srv.opts.OutboxMaxMessages), zap.Int("max_bytes", sess.srv.opts.OutboxMaxBytes),
		sess.memoryField())
	sess.closeApp(statusTryAgainLater, buffer.ErrReplayLogFull.Error())
}
