package proxy

import (
	"context"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/upstream"
)

// Restore sends what waited in the outbox, oldest first, then makes c the live
// connection. Messages the app sends meanwhile join the outbox and are sent by
// this loop too, so order is kept: c becomes live only when the outbox is empty,
// checked under the same lock fromApp uses.
func (sess *Session) Restore(ctx context.Context, c *upstream.Conn) error {
	sent := 0
	for {
		sess.mu.Lock()
		m, ok := sess.outbox.Pop()
		if !ok {
			sess.live = c
			sess.mu.Unlock()
			if sent > 0 {
				sess.log.Info("outbox flushed", zap.Uint64("gen", c.Gen()), zap.Int("messages", sent))
			}
			return nil
		}
		sess.mu.Unlock()
		if err := c.Send(ctx, opcode(m), m.Data); err != nil {
			sess.mu.Lock()
			sess.outbox.PushFront(m)
			sess.mu.Unlock()
			return err
		}
		sent++
	}
}

func opcode(m buffer.Message) ws.OpCode {
	if m.Binary {
		return ws.OpBinary
	}
	return ws.OpText
}

// Message forwards one upstream message to the app. It blocks while the app's
// write queue is full: that is the back-pressure on upstream reads.
func (sess *Session) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	select {
	case <-sess.appReady:
	case <-sess.ctx.Done():
		return
	}
	if err := sess.app.Send(sess.ctx, op, data); err != nil {
		sess.log.Debug("upstream message not delivered, app is closing",
			zap.Uint64("gen", c.Gen()), zap.Int("bytes", len(data)), zap.Error(err))
	}
}

// Lost stops direct sends to c; later app messages queue until the next Restore.
func (sess *Session) Lost(c *upstream.Conn, err error) {
	sess.mu.Lock()
	if sess.live == c {
		sess.live = nil
	}
	sess.mu.Unlock()
}
