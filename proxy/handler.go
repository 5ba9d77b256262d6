package proxy

import (
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream"
)

// Message forwards one upstream message to the app, unless a rule hides it
// (hide.go). It blocks while the app's write queue is full: that is the
// back-pressure on upstream reads.
func (sess *Session) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	if sess.srv.rules.upstream && sess.hidden(c, data) {
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
	sess.srv.opts.Metrics.Message(DirectionUpstreamToApp)
}

// Lost stops direct sends to c; later app messages queue until the next Restore.
func (sess *Session) Lost(c *upstream.Conn, err error) {
	sess.mu.Lock()
	if sess.live == c {
		sess.live = nil
	}
	sess.restore.lost(c)
	sess.mu.Unlock()
}
