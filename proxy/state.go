package proxy

import (
	"slices"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/upstream"
)

// restoreState is what a session remembers of the app's conversation with
// the upstream, so that a new upstream connection, which remembers nothing,
// can be brought back to where the app left the previous one. It is guarded
// by Session.mu; its methods do no I/O and never block.
type restoreState struct {
	rules    *ruleSet
	auth     *authRecord       // the app's latest login message; nil before one
	authN    uint64            // numbers auth records
	log      *buffer.ReplayLog // subscriptions
	pending  *buffer.Pending   // sent, waiting for an ack; nil without acks
	acked    *buffer.RecentIDs // acknowledged ids; nil without acks
	waits    replyWaits        // requests on the current connection whose replies are looked for
	seenOnce bool              // the app has seen a message matching HideOnReconnectMatch

	// snapped is the connection whose restore has taken its snapshot of auth
	// and log, until it goes live or is lost. App auth and (un)subscribe
	// messages arriving meanwhile are missing from that snapshot, so they
	// are also queued, as copies the next snapshot discards. epoch counts
	// snapshots: a message remembered in an older epoch is in the current
	// connection's snapshot already, and is neither sent nor queued again.
	snapped  *upstream.Conn
	epoch    uint64
	authWait *authWait // the restore waiting for AuthOKMatch, if any
}

// authRecord is the app's latest login message.
type authRecord struct {
	msg      buffer.Message
	replyID  string
	answered bool   // the app has seen the reply to it
	ref      uint64 // refAuth | number of the record
}

// authWait is a restore waiting for the upstream's reply to the login it
// re-sent on conn.
type authWait struct {
	conn *upstream.Conn
	ok   chan struct{} // closed by the upstream reader when the reply arrives
	hide bool          // the app has seen its auth reply: this one is hidden
	ref  uint64        // the auth record re-sent
	done bool          // ok is closed
}

// References an outbox message carries (buffer.Message.Ref) when it is a
// copy of a message the restore state also holds: a replay-log Seq (below
// refUnlogged), refAuth with the auth record's number, or refUnlogged for a
// keyed unsubscribe, whose effect the log holds without keeping it.
const (
	refUnlogged uint64 = 1 << 62
	refAuth     uint64 = 1 << 63
)

// Why an upstream message is not forwarded (log field "reason", counters).
const (
	hideAuthReply = "reply to a replayed login"
	hideReply     = "reply to a replayed request"
	hideRepeat    = "seen before a reconnect"
	hideAck       = "repeated acknowledgement"
)

func newRestoreState(r *ruleSet, maxMessages, maxBytes int, budget *buffer.Budget, policy buffer.Overflow) restoreState {
	st := restoreState{rules: r, log: buffer.NewReplayLog(maxMessages, maxBytes)}
	if r.acks {
		st.pending = buffer.NewPending(budget, policy)
		st.acked = buffer.NewRecentIDs(maxMessages)
	}
	st.waits.max = 2*maxMessages + 1
	return st
}

// remember records a restorable app message and returns the reference its
// queued copies carry. It returns buffer.ErrReplayLogFull when the log
// cannot keep it.
func (st *restoreState) remember(c appClass, m buffer.Message) (uint64, error) {
	if c.kind == appAuth {
		st.authN++
		st.auth = &authRecord{msg: m, replyID: c.replyID, ref: refAuth | st.authN}
		return st.auth.ref, nil
	}
	op := buffer.ReplaySubscribe
	if c.kind == appUnsubscribe {
		op = buffer.ReplayUnsubscribe
	}
	seq, err := st.log.Add(buffer.ReplayEntry{Op: op, Key: c.key, Keyed: c.keyed, Message: m, ReplyID: c.replyID})
	if seq == 0 {
		return refUnlogged, err
	}
	return seq, err
}

// snapshot is what one restore re-sends before the outbox.
type snapshot struct {
	auth    *authRecord // a copy; nil when the app never logged in
	wait    *authWait   // nil unless the restore waits for AuthOKMatch
	entries []buffer.ReplayEntry
}

// begin takes the snapshot for a restore of c: queued copies of restorable
// messages are dropped (the snapshot covers them), the reply waits of the
// previous connection are forgotten (its replies will never come), and the
// replies to what the snapshot re-sends are looked for, in send order.
func (st *restoreState) begin(c *upstream.Conn, outbox *buffer.Outbox) (snapshot, int) {
	purged := outbox.DeleteFunc(func(m buffer.Message) bool { return m.Ref != 0 })
	st.snapped, st.authWait = c, nil
	st.epoch++
	st.waits.reset()
	var s snapshot
	if st.auth != nil {
		a := *st.auth
		s.auth = &a
		st.waits.add(a.replyID, waiter{own: a.answered, ref: a.ref})
		if st.rules.AuthOKMatch != nil {
			st.authWait = &authWait{conn: c, ok: make(chan struct{}), hide: a.answered, ref: a.ref}
			s.wait = st.authWait
		}
	}
	s.entries = st.log.Entries()
	for _, e := range s.entries {
		st.waits.add(e.ReplyID, waiter{own: e.Answered, ref: e.Seq})
	}
	return s, purged
}

// sentLive records that a restorable message went straight to the live
// connection: its reply is the app's.
func (st *restoreState) sentLive(c appClass, ref uint64) {
	st.waits.add(c.replyID, waiter{ref: ref})
}

// flushed records that a queued message is about to be sent on c.
func (st *restoreState) flushed(m buffer.Message, gen uint64) {
	if m.ID != "" && st.pending != nil {
		st.pending.Move(m, gen)
	}
	if m.Ref != 0 {
		st.waits.add(st.replyIDOf(m.Ref), waiter{ref: m.Ref})
	}
}

// unflushed undoes flushed for a message that could not be sent.
func (st *restoreState) unflushed(m buffer.Message) {
	if m.ID != "" && st.pending != nil {
		st.pending.Remove(m.ID)
	}
}

func (st *restoreState) replyIDOf(ref uint64) string {
	switch {
	case ref&refAuth != 0:
		if st.auth != nil && st.auth.ref == ref {
			return st.auth.replyID
		}
	case ref < refUnlogged:
		if e, ok := st.log.Get(ref); ok {
			return e.ReplyID
		}
	}
	return ""
}

// lost forgets what concerned connection c.
func (st *restoreState) lost(c *upstream.Conn) {
	if st.snapped == c {
		st.snapped = nil
	}
	if st.authWait != nil && st.authWait.conn == c {
		st.authWait = nil
	}
}

// endWait stops looking for the login reply of w.
func (st *restoreState) endWait(w *authWait) {
	if st.authWait == w {
		st.authWait = nil
	}
}

// upstreamMessage applies the upstream-side rules to one message from c
// and returns why it is hidden from the app, or "" to forward it. Every
// rule updates its state whether or not another one hides the message
// (DESIGN.md: "A hidden message still updates state"); what records that
// the app has seen something applies only when it is forwarded.
func (st *restoreState) upstreamMessage(c *upstream.Conn, u upClass) string {
	var hide string
	var seen []uint64 // requests whose reply this is, if it reaches the app
	if u.authOK {
		if h, ref := st.authReply(c); h {
			hide = hideAuthReply
		} else if ref != 0 {
			seen = append(seen, ref)
		}
	}
	if u.replyID != "" {
		if w, ok := st.waits.take(u.replyID); ok && w.own {
			hide = firstOf(hide, hideReply)
		} else if ok {
			seen = append(seen, w.ref)
		}
	}
	if u.ack && st.ack(u.ackID) {
		hide = firstOf(hide, hideAck)
	}
	if u.hideRepeat && st.seenOnce {
		hide = firstOf(hide, hideRepeat)
	}
	if hide == "" {
		st.seenOnce = st.seenOnce || u.hideRepeat
		for _, ref := range seen {
			st.answered(ref)
		}
	}
	return hide
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// authReply handles a message matching AuthOKMatch: it releases a restore
// waiting for it on c and says whether it is hidden; otherwise it returns
// the auth record it answers.
func (st *restoreState) authReply(c *upstream.Conn) (hide bool, ref uint64) {
	if w := st.authWait; w != nil && w.conn == c && !w.done {
		w.done = true
		close(w.ok)
		return w.hide, w.ref
	}
	if st.auth != nil && !st.auth.answered {
		return false, st.auth.ref
	}
	return false, 0
}

// ack handles an acknowledgement and reports whether it is a repeat: the
// id was already acknowledged and nothing with it is pending.
func (st *restoreState) ack(id string) bool {
	if _, ok := st.pending.Remove(id); ok {
		st.acked.Add(id)
		return false
	}
	return st.acked.Contains(id)
}

// answered records that the app has seen the reply to the request ref.
func (st *restoreState) answered(ref uint64) {
	switch {
	case ref&refAuth != 0:
		if st.auth != nil && st.auth.ref == ref {
			st.auth.answered = true
		}
	case ref != 0 && ref < refUnlogged:
		st.log.SetAnswered(ref, true)
	}
}

// replyWaits matches upstream replies to the requests sent on the current
// connection by their TETHER_REPLY_ID_PATH value. Replies are assumed to
// come in request order for requests sharing an id, which is what lets an
// app that reuses one id for everything still have only the replies to
// tether's own replays hidden. It is bounded: past max, requests are not
// followed and their replies reach the app, the safe side.
type replyWaits struct {
	byID map[string][]waiter
	n    int
	max  int
}

// waiter is one request waiting for its reply.
type waiter struct {
	own bool   // tether re-sent it and the app has already seen its reply: hide
	ref uint64 // the auth record or log entry, marked answered when the app sees the reply
}

func (w *replyWaits) reset() {
	clear(w.byID)
	w.n = 0
}

func (w *replyWaits) add(id string, wt waiter) {
	if id == "" || w.n >= w.max {
		return
	}
	if w.byID == nil {
		w.byID = map[string][]waiter{}
	}
	w.byID[id] = append(w.byID[id], wt)
	w.n++
}

// take removes and returns the oldest request waiting for a reply with id.
func (w *replyWaits) take(id string) (waiter, bool) {
	q := w.byID[id]
	if len(q) == 0 {
		return waiter{}, false
	}
	wt := q[0]
	if len(q) == 1 {
		delete(w.byID, id)
	} else {
		w.byID[id] = slices.Delete(q, 0, 1)
	}
	w.n--
	return wt, true
}
