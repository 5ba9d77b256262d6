package proxy

import (
	"context"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/upstream"
)

// restoreResume sends TETHER_RESUME_MESSAGE after the login: the server is
// asked for everything after the last number delivered in each stream, so
// its replay fills what the outage cost before anything else arrives
// (DESIGN.md "Restoring the application", step 2). When there is nothing
// to resume (seqState.resumeData), nothing is sent.
//
// A message that fails to render is logged and left out rather than failing
// the attempt: rendering would fail on every connection, and the gap
// timeout and HTTP catch-up still protect the stream.
func (sess *Session) restoreResume(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	rs := &sess.srv.rules.seq
	if !rs.on || !rs.ResumeMessage.IsSet() {
		return nil
	}
	sess.mu.Lock()
	data := sess.seq.resumeData(c.Gen(), rs)
	sess.mu.Unlock()
	for _, d := range data {
		msg, err := rs.ResumeMessage.Render(d)
		if err != nil {
			sess.log.Error("resume message not rendered, not sent", zap.Uint64("gen", c.Gen()),
				streamField(d.Stream), zap.Error(err))
			continue
		}
		if err := c.SendText(ctx, msg); err != nil {
			return err
		}
		r.resumed++
		sess.logResume(c, d)
	}
	return nil
}

func (sess *Session) logResume(c *upstream.Conn, d template.Resume) {
	sess.log.Debug("resume sent", zap.Uint64("gen", c.Gen()), streamField(d.Stream), zap.Int64("last_seq", d.LastSeq))
}
