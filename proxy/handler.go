package proxy

import (
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream"
)

// Message forwards one upstream message to the app, unless a rule hides it
// (hide.go) or the sequence rules drop or hold it (sequencer.go). It blocks
// while the app's write queue is full: that is the back-pressure on
// upstream reads. With no rule configured, the message is not looked at.
func (sess *Session) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	rs := &sess.srv.rules
	hidden := rs.upstream && sess.hidden(c, data)
	if rs.seq.on {
		sess.sequenced(c.Gen(), op, data, hidden)
		return
	}
	if hidden {
		return
	}
	select {
	case <-sess.appReady:
	case <-sess.ctx.Done():
		return
	}
	if err := sess.app.Send(sess.ctx, op, data); err != nil {
		sess.log.Debug("upstream message not delivered, app is closing",
			zap.Uint64("gen", c.Gen()), zap.Int("bytes", len(data)), zap.Error(err))
		return
	}
	sess.countMessage(DirectionUpstreamToApp)
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
		sess.flush(b) // fetches and log lines only: no message is released
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
