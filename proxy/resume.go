package proxy

import (
	"context"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream"
)

// restoreResume sends TETHER_RESUME_MESSAGE after the login: the server is
// asked for everything after the last number delivered in each stream, so
// its replay fills what the outage cost before anything else arrives
// (docs/design.md "Restoring the application", step 2). The Sequencer
// renders the messages and remembers which streams were asked for on c
// (sequence.Sequencer.ResumeMessages); when there is nothing to resume,
// nothing is sent.
func (sess *Session) restoreResume(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	if sess.seq == nil {
		return nil
	}
	for _, m := range sess.seq.ResumeMessages(c.Gen()) {
		if err := c.SendText(ctx, m.Message); err != nil {
			return err
		}
		r.resumed++
		sess.log.Debug("resume sent", zap.Uint64("gen", c.Gen()), zap.String("stream", m.Stream),
			zap.Int64("last_seq", m.LastSeq))
	}
	return nil
}
