package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/upstream"
)

// defaultAuthWait bounds the wait for the login reply when the upstream
// options carry no DialTimeout (configuration always sets one).
const defaultAuthWait = 10 * time.Second

// restoreStep is one stage of bringing a new connection back to where the
// app left the previous one.
type restoreStep struct {
	name string
	run  func(ctx context.Context, c *upstream.Conn, r *restoreRun) error
}

// restoreRun is one Restore: its snapshot and what it sent.
type restoreRun struct {
	snapshot
	purged                                       int // queued copies the snapshot made redundant
	authSent, resumed, replayed, flushed, resent int
}

// restoreSteps are the stages of DESIGN.md "Restoring the application", in
// the order the server must see them: the resume message asks for what the
// outage cost before the subscriptions bring new traffic.
func (sess *Session) restoreSteps() []restoreStep {
	return []restoreStep{
		{"login", sess.restoreAuth},
		{"resume", sess.restoreResume},
		{"replay log", sess.restoreReplay},
		{"outbox", sess.restoreOutbox},
		{"unacknowledged", sess.restoreUnacked},
	}
}

// Restore brings the new connection c up to date, then makes it the live
// connection: until then the app's messages queue (auth and subscriptions
// are remembered instead), and the final flush and the switch to live
// happen under the lock fromApp uses, so no message is stranded or
// overtaken. An error fails the attempt: the upstream client closes c and
// backs off.
func (sess *Session) Restore(ctx context.Context, c *upstream.Conn) error {
	sess.checkProtocol(c)
	r := sess.beginRestore(c)
	for _, step := range sess.restoreSteps() {
		if err := step.run(ctx, c, r); err != nil {
			sess.countRestore(r, false)
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	if err := sess.flushOutbox(ctx, c, r, true); err != nil {
		sess.countRestore(r, false)
		return fmt.Errorf("outbox: %w", err)
	}
	sess.countRestore(r, true)
	sess.log.Info("session restored", zap.Uint64("gen", c.Gen()), zap.Int("auth_sent", r.authSent),
		zap.Int("resumed", r.resumed), zap.Int("replayed", r.replayed), zap.Int("outbox_flushed", r.flushed),
		zap.Int("unacked_resent", r.resent))
	return nil
}

func (sess *Session) beginRestore(c *upstream.Conn) *restoreRun {
	sess.mu.Lock()
	s, purged := sess.restore.begin(c, sess.outbox)
	sess.mu.Unlock()
	if purged > 0 {
		sess.log.Debug("queued copies of login and subscriptions left to the restore",
			zap.Uint64("gen", c.Gen()), zap.Int("messages", purged))
	}
	return &restoreRun{snapshot: s, purged: purged}
}

// restoreAuth re-sends the app's latest login and, with AuthOKMatch, waits
// for the server's reply: subscriptions sent before it would be refused.
// No reply within the dial timeout, or the connection ending, fails the
// attempt.
func (sess *Session) restoreAuth(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	if r.auth == nil {
		return nil
	}
	if r.wait != nil {
		defer func() {
			sess.mu.Lock()
			sess.restore.endWait(r.wait)
			sess.mu.Unlock()
		}()
	}
	if err := c.Send(ctx, opcode(r.auth.msg), r.auth.msg.Data); err != nil {
		return err
	}
	r.authSent = 1
	if r.wait == nil {
		return nil
	}
	return sess.awaitAuthOK(ctx, r.wait)
}

func (sess *Session) awaitAuthOK(ctx context.Context, w *authWait) error {
	limit := sess.srv.opts.Upstream.DialTimeout
	if limit <= 0 {
		limit = defaultAuthWait
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-w.ok:
		return nil
	case <-t.C:
		sess.srv.totals.authTimeouts.Add(1)
		return fmt.Errorf("%w (%s)", ErrNoAuthReply, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restoreReplay sends the replay log's snapshot, in order.
func (sess *Session) restoreReplay(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	for _, e := range r.entries {
		if err := c.Send(ctx, opcode(e.Message), e.Message.Data); err != nil {
			return err
		}
		r.replayed++
	}
	return nil
}

func (sess *Session) restoreOutbox(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	return sess.flushOutbox(ctx, c, r, false)
}

// flushOutbox sends what waits in the outbox, oldest first. With goLive,
// the check that finds the outbox empty also makes c the live connection,
// under the lock fromApp queues with: a message the app sends meanwhile is
// either queued before that check, and sent by this loop, or sent directly
// after it. Acknowledged messages become pending as they are taken out.
func (sess *Session) flushOutbox(ctx context.Context, c *upstream.Conn, r *restoreRun, goLive bool) error {
	for {
		sess.mu.Lock()
		m, ok := sess.outbox.Pop()
		if !ok {
			if goLive {
				sess.live = c
				sess.restore.snapped = nil
			}
			sess.mu.Unlock()
			return nil
		}
		sess.restore.flushed(m, c.Gen())
		sess.mu.Unlock()
		if err := c.Send(ctx, opcode(m), m.Data); err != nil {
			sess.mu.Lock()
			sess.restore.unflushed(m)
			sess.outbox.PushFront(m)
			sess.mu.Unlock()
			return err
		}
		r.flushed++
	}
}

// restoreUnacked re-sends the messages sent on earlier connections and not
// acknowledged, in first-send order; the server deduplicates by id.
func (sess *Session) restoreUnacked(ctx context.Context, c *upstream.Conn, r *restoreRun) error {
	if sess.restore.pending == nil {
		return nil
	}
	sess.mu.Lock()
	again := sess.restore.pending.Resend(c.Gen())
	sess.mu.Unlock()
	for _, m := range again {
		if err := c.Send(ctx, opcode(m), m.Data); err != nil {
			return err
		}
		r.resent++
	}
	return nil
}

// countRestore adds what one restore sent to the server's totals.
func (sess *Session) countRestore(r *restoreRun, restored bool) {
	t := &sess.srv.totals
	if restored {
		t.restores.Add(1)
	}
	t.authSent.Add(uint64(r.authSent))
	t.replayed.Add(uint64(r.replayed))
	t.flushed.Add(uint64(r.flushed))
	t.resent.Add(uint64(r.resent))
	if n := r.authSent + r.replayed + r.resent; n > 0 {
		sess.srv.opts.Metrics.Replayed(n)
	}
}

func opcode(m buffer.Message) ws.OpCode {
	if m.Binary {
		return ws.OpBinary
	}
	return ws.OpText
}
