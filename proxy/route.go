package proxy

import (
	"slices"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/upstream"
)

// appMessage is one app message on its way upstream, classified once.
type appMessage struct {
	op         ws.OpCode
	data       []byte // the reader's buffer: valid during fromApp only
	class      appClass
	ref        uint64         // the restore state's reference, once remembered
	remembered bool           // rememberLocked has run
	epoch      uint64         // the restore state's epoch when it was remembered
	copy       buffer.Message // data cloned once, when something keeps it
}

// stored returns the message as the session's stores keep it, cloning the
// payload the first time.
func (m *appMessage) stored() buffer.Message {
	if m.copy.Data == nil {
		m.copy = buffer.Message{Binary: m.op == ws.OpBinary, Data: slices.Clone(m.data), ID: m.class.ackID}
		if m.copy.Data == nil {
			m.copy.Data = []byte{}
		}
	}
	c := m.copy
	if m.class.restorable() {
		c.Ref = m.ref
	}
	return c
}

// rememberLocked records a login or (un)subscribe message in the restore
// state, once. It returns buffer.ErrReplayLogFull when the log cannot keep
// it. sess.mu is held.
func (sess *Session) rememberLocked(m *appMessage) error {
	if !m.class.restorable() || m.remembered {
		return nil
	}
	m.remembered = true
	m.epoch = sess.restore.epoch
	ref, err := sess.restore.remember(m.class, m.stored())
	m.ref = ref
	return err
}

// coveredLocked reports whether a restore snapshot taken since m was
// remembered holds it: the connection it restores has it, or will, and it
// must not be sent or queued again. sess.mu is held.
func (sess *Session) coveredLocked(m *appMessage) bool {
	return m.class.restorable() && m.epoch != sess.restore.epoch
}

// sendingLocked prepares m for a direct send on live: an acknowledged
// message becomes pending (under the outbox caps and overflow policy), and
// the reply to a restorable one is the app's. sent is false when the
// message must not be sent: the caps refused or dropped it. sess.mu is held.
func (sess *Session) sendingLocked(m *appMessage, live *upstream.Conn) (dropped []buffer.Message, sent bool, err error) {
	if m.class.restorable() {
		sess.restore.sentLive(m.class, m.ref)
	}
	if m.class.ackID == "" || sess.restore.pending == nil {
		return nil, true, nil
	}
	dropped, err = sess.restore.pending.Add(m.stored(), live.Gen())
	return dropped, err == nil && sess.restore.pending.Has(m.class.ackID), err
}

// replayLogFull closes the app with 1013: the subscription it just sent
// cannot be kept for replay, and replaying a partial set after the next
// reconnect would lose its streams silently.
func (sess *Session) replayLogFull() {
	sess.srv.totals.replayLogFull.Add(1)
	sess.log.Warn("replay log full, closing app",
		zap.Int("max_messages", sess.srv.opts.OutboxMaxMessages), zap.Int("max_bytes", sess.srv.opts.OutboxMaxBytes))
	sess.closeApp(statusTryAgainLater, buffer.ErrReplayLogFull.Error())
}
