package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/sequence"
	"github.com/tetherproxy/tether/upstream"
)

// defaultAuthWait bounds the wait for the login reply when the upstream
// options carry no DialTimeout (configuration always sets one).
const defaultAuthWait = 10 * time.Second

// restoreStep is one stage of bringing a new connection back to where the
// app left the previous one.
type restoreStep struct {
	name string
	run  func(r *restoreRun, ctx context.Context) error
}

// restoreSteps are the stages of docs/design.md "Restore order", in the
// order the server must see them: the resume message asks for what the
// outage cost before the subscriptions bring new traffic, and the messages
// sent before the loss and not acknowledged go before those the app queued
// since, so that nothing the app sent later overtakes them.
var restoreSteps = []restoreStep{
	{"login", (*restoreRun).login},
	{"resume", func(r *restoreRun, ctx context.Context) error { return r.sess.restoreResume(ctx, r.c, r) }},
	{"folded", (*restoreRun).folded},
	{"replay log", (*restoreRun).replay},
	{"replies", (*restoreRun).awaitReplies},
	{"unacknowledged", (*restoreRun).unacked},
	{"outbox", func(r *restoreRun, ctx context.Context) error { return r.flushOutbox(ctx, false) }},
}

// restoreRun is one Restore of connection c: its snapshot and what it sent.
type restoreRun struct {
	sess *Session
	c    *upstream.Conn
	protocol.Snapshot
	purged                                       int // queued copies the snapshot made redundant
	authSent, resumed, replayed, flushed, resent int
}

// Restore brings the new connection c up to date, then makes it the live
// connection: until then the app's messages queue (auth and subscriptions
// are remembered instead), and the final flush and the switch to live
// happen under the lock fromApp uses, so no message is stranded or
// overtaken. An error fails the attempt: the upstream client closes c and
// backs off.
func (h upstreamHandler) Restore(ctx context.Context, c *upstream.Conn) error {
	sess := h.sess
	if err := sess.subprotocol.check(c); err != nil {
		return err
	}
	r := sess.beginRestore(c)
	for _, step := range restoreSteps {
		if err := step.run(r, ctx); err != nil {
			r.count(false)
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	if err := r.flushOutbox(ctx, true); err != nil {
		r.count(false)
		return fmt.Errorf("outbox: %w", err)
	}
	r.count(true)
	sess.log.Info("session restored", zap.Uint64("gen", c.Gen()), zap.Int("auth_sent", r.authSent),
		zap.Int("resumed", r.resumed), zap.Int("replayed", r.replayed), zap.Int("outbox_flushed", r.flushed),
		zap.Int("unacked_resent", r.resent))
	return nil
}

// beginRestore takes the snapshot for a restore of c: queued copies of
// restorable messages are dropped (the snapshot covers them), and app
// logins and (un)subscriptions arriving until c goes live are queued as
// well as remembered (snapped, epoch).
func (sess *Session) beginRestore(c *upstream.Conn) *restoreRun {
	sess.mu.Lock()
	purged := sess.outbox.DeleteFunc(func(m buffer.Message) bool { return m.Ref != 0 })
	sess.snapped = c
	sess.epoch++
	s := sess.state.Begin(c.Gen())
	sess.mu.Unlock()
	if purged > 0 {
		sess.log.Debug("queued copies of login and subscriptions left to the restore",
			zap.Uint64("gen", c.Gen()), zap.Int("messages", purged))
	}
	return &restoreRun{sess: sess, c: c, Snapshot: s, purged: purged}
}

// login re-sends the app's latest login and, when the protocol answers
// logins, waits for the server's reply: subscriptions sent before it would
// be refused. No reply within the dial timeout, or the connection ending,
// fails the attempt.
func (r *restoreRun) login(ctx context.Context) error {
	if r.Login == nil {
		return nil
	}
	if r.Wait != nil {
		defer func() {
			r.sess.mu.Lock()
			r.sess.state.EndWait(r.Wait)
			r.sess.mu.Unlock()
		}()
	}
	if err := r.c.Send(ctx, opcode(*r.Login), r.Login.Data); err != nil {
		return err
	}
	r.c.LoggedIn()
	r.authSent = 1
	if r.Wait == nil {
		return nil
	}
	return r.awaitLogin(ctx)
}

// replyLimit bounds the waits for the login's and the replays' replies.
func (r *restoreRun) replyLimit() time.Duration {
	if limit := r.sess.srv.opts.Upstream.DialTimeout; limit > 0 {
		return limit
	}
	return defaultAuthWait
}

func (r *restoreRun) awaitLogin(ctx context.Context) error {
	limit := r.replyLimit()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.Wait.Answered():
		return nil
	case <-t.C:
		r.sess.srv.totals.authTimeouts.Add(1)
		return fmt.Errorf("%w (%s)", ErrNoAuthReply, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// folded sends the requests an unsubscribe folded away while the upstream
// was down whose replies the app waits for (protocol/folded.go), before the
// replay log: a subscribe the app made again after its unsubscribe is
// replayed after them, and stays.
func (r *restoreRun) folded(ctx context.Context) error {
	for _, m := range r.Folded {
		if err := r.c.Send(ctx, opcode(m), m.Data); err != nil {
			return err
		}
		r.replayed++
	}
	if len(r.Folded) > 0 {
		r.sess.mu.Lock()
		r.sess.state.FoldedSent(len(r.Folded))
		r.sess.mu.Unlock()
	}
	return nil
}

// replay sends the replay log's snapshot, in order, each entry as the
// protocol rewrites it, if it does (rewritten).
func (r *restoreRun) replay(ctx context.Context) error {
	msgs := r.rewritten()
	for i, e := range r.Entries {
		data := e.Message.Data
		if msgs != nil {
			data = msgs[i]
		}
		if err := r.c.Send(ctx, opcode(e.Message), data); err != nil {
			return err
		}
		r.replayed++
	}
	return nil
}

// awaitReplies waits, when the protocol asks (AwaitReplies), for the
// replies to the subscriptions just replayed, before anything of the app's
// goes on the connection: no reply within the dial timeout, or the
// connection ending, fails the attempt.
func (r *restoreRun) awaitReplies(ctx context.Context) error {
	w := r.Replies
	if w == nil {
		return nil
	}
	defer func() {
		r.sess.mu.Lock()
		r.sess.state.EndReplies(w)
		r.sess.mu.Unlock()
	}()
	limit := r.replyLimit()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-w.Answered():
		return nil
	case <-t.C:
		r.sess.mu.Lock()
		left := w.Left()
		r.sess.mu.Unlock()
		return fmt.Errorf("%w (%s, %d missing)", ErrNoReplayReply, limit, left)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rewritten returns the snapshot's entries as the protocol's Replayer
// (Capabilities.Replay) rewrites them from what the session knows now,
// after the resume step; nil without one. What the Replayer reads is the
// Sequencer's Position, a copy taken once, so every entry is rewritten
// from the same moment and no lock is held while it runs. An entry that
// fails to rewrite is sent as the app sent it: the subscription goes on,
// and the sequence rules still see what it missed. The failure is logged.
func (r *restoreRun) rewritten() [][]byte {
	rp := r.sess.srv.rules.caps.Replay
	if rp == nil || len(r.Entries) == 0 {
		return nil
	}
	sess := r.sess
	out := make([][]byte, len(r.Entries))
	var failed []error
	var now protocol.Current = sequence.Position{}
	if sess.seq != nil {
		now = sess.seq.Position()
	}
	for i, e := range r.Entries {
		data, err := rp.Replay(entryOf(e), now)
		if err != nil {
			failed = append(failed, fmt.Errorf("entry %d: %w", i, err))
			data = e.Message.Data
		}
		out[i] = data
	}
	for _, err := range failed {
		sess.log.Warn("replayed subscription not rewritten, sent as the app sent it",
			zap.Uint64("gen", r.c.Gen()), zap.Error(err))
	}
	return out
}

// entryOf is a replay-log entry as a Replayer sees it.
func entryOf(e buffer.ReplayEntry) protocol.Entry {
	op := protocol.AppSubscribe
	if e.Op == buffer.ReplayUnsubscribe {
		op = protocol.AppUnsubscribe
	}
	return protocol.Entry{Message: e.Message.Data, Key: e.Key, Keyed: e.Keyed, Op: op}
}

// flushOutbox sends what waits in the outbox, oldest first. With goLive,
// the check that finds the outbox empty also makes c the live connection,
// under the lock fromApp queues with: a message the app sends meanwhile is
// either queued before that check, and sent by this loop, or sent directly
// after it. Acknowledged messages become pending as they are taken out.
func (r *restoreRun) flushOutbox(ctx context.Context, goLive bool) error {
	sess := r.sess
	for {
		sess.mu.Lock()
		m, ok := sess.outbox.Pop()
		if !ok {
			if goLive {
				sess.live = r.c
				sess.snapped = nil
			}
			sess.mu.Unlock()
			return nil
		}
		sess.state.Flushed(m, r.c.Gen())
		sess.mu.Unlock()
		if err := r.c.Send(ctx, opcode(m), m.Data); err != nil {
			sess.mu.Lock()
			sess.state.Unflushed(m)
			sess.outbox.PushFront(m)
			sess.mu.Unlock()
			return err
		}
		if protocol.IsLogin(m.Ref) {
			r.c.LoggedIn()
		}
		r.flushed++
	}
}

// unacked re-sends the messages sent on earlier connections and not
// acknowledged, in first-send order, each as the protocol rewrites a
// re-send (Capabilities.Resend); the server deduplicates by id. The
// outbox has not been flushed yet: the messages it takes out on this
// connection are pending for this generation, which Resend leaves alone.
func (r *restoreRun) unacked(ctx context.Context) error {
	pending := r.sess.state.Pending()
	if pending == nil {
		return nil
	}
	r.sess.mu.Lock()
	again := pending.Resend(r.c.Gen())
	r.sess.mu.Unlock()
	rewrite := r.sess.srv.rules.caps.Resend
	for _, m := range again {
		data := m.Data
		if rewrite != nil {
			data = rewrite(data)
		}
		if err := r.c.Send(ctx, opcode(m), data); err != nil {
			return err
		}
		r.resent++
	}
	return nil
}

// count adds what the restore sent to the server's totals. The restore
// itself is counted last: whoever reads n restores also reads what they
// sent.
func (r *restoreRun) count(restored bool) {
	t := &r.sess.srv.totals
	t.authSent.Add(uint64(r.authSent))
	t.replayed.Add(uint64(r.replayed))
	t.flushed.Add(uint64(r.flushed))
	t.resent.Add(uint64(r.resent))
	if n := r.authSent + r.replayed + r.resent; n > 0 {
		r.sess.srv.opts.Metrics.Replayed(n)
	}
	if restored {
		t.restores.Add(1)
	}
}

func opcode(m buffer.Message) ws.OpCode {
	if m.Binary {
		return ws.OpBinary
	}
	return ws.OpText
}
