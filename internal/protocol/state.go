package protocol

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/tetherproxy/tether/buffer"
)

// State is what one session remembers of the app's conversation with the
// upstream, as its protocol classified it, so that a new upstream
// connection, which remembers nothing, can be brought back to where the
// app left the previous one: the app's latest login, the replay log of its
// subscriptions, the replies tether looks for, the messages waiting for an
// acknowledgement and the ids already acknowledged. It is the same for
// every protocol: a protocol differs in how it classifies, not in what is
// remembered of it.
//
// A State is guarded by its session's lock; its methods do no I/O and
// never block. Connections are named by their generation (upstream.Conn's
// Gen); 0 is a message that came over HTTP, on no connection.
type State struct {
	awaitLogin   bool
	awaitReplies bool
	login        *loginRecord      // the app's latest login message; nil before one
	loginN       uint64            // numbers login records
	log          *buffer.ReplayLog // subscriptions
	pending      *buffer.Pending   // sent, waiting for an ack; nil without acks
	acked        *buffer.RecentIDs // acknowledged ids; nil without acks
	waits        replyWaits        // requests on the current connection whose replies are looked for
	seenOnce     bool              // the app has seen a message classified Once without a key
	onceByKey    onceKeys          // the same per key, and the answers to tether's replays
	wait         *LoginWait        // the restore waiting for the login reply, if any
	replies      *ReplyWait        // the restore waiting for the replies to its replays, if any
	// once holds the App.AtMostOnce entries of the log: Seq → the
	// connection it was sent on, 0 while unsent. Entries that left the log
	// are pruned when the next connection is lost.
	once      map[uint64]uint64
	pings     keepalives // the app keepalives the current connection has not answered
	asked     asked      // the upstream's ping the app has not answered (Keepalive.OnlyAsked)
	folded    []folded   // requests folded away while down, sent on the next connection (folded.go)
	maxFolded int
	// delivered are the ids the app may settle (Upstream.DeliveryID) on
	// connection deliveredGen, the newest that delivered any; nil before.
	delivered    *buffer.RecentIDs
	deliveredGen uint64
	maxDelivered int
}

// Limits bound a State. MaxMessages and MaxBytes cap the replay log, and
// the recent acknowledged ids remembered; the messages waiting for an ack
// share Budget (the outbox's caps) under Overflow. Meter, when not nil, is
// the session's account on tether's memory budget (TETHER_MEMORY_LIMIT):
// the replay log's bytes count on it, and an entry it refuses is refused
// as one beyond the caps is (buffer.ErrReplayLogFull).
type Limits struct {
	MaxMessages, MaxBytes int
	Budget                *buffer.Budget
	Overflow              buffer.Overflow
	Meter                 buffer.Meter
}

// loginRecord is the app's latest login message.
type loginRecord struct {
	msg      buffer.Message
	replyID  string
	answered bool   // the app has seen the reply to it
	ref      uint64 // refLogin | number of the record
}

// LoginWait is a restore waiting for the upstream's reply to the login it
// re-sent on connection gen.
type LoginWait struct {
	gen  uint64
	ok   chan struct{} // closed by Upstream when the reply arrives
	hide bool          // the app has seen its login reply: this one is hidden
	ref  uint64        // the login record re-sent
	done bool          // ok is closed
}

// Answered is closed when the reply arrives.
func (w *LoginWait) Answered() <-chan struct{} { return w.ok }

// ReplyWait is a restore waiting for the upstream's replies to the
// subscriptions it replayed on connection gen (Capabilities.AwaitReplies).
type ReplyWait struct {
	gen  uint64
	left int           // replies still to come
	ok   chan struct{} // closed by Upstream when the last arrives
}

// Answered is closed when every reply has arrived.
func (w *ReplyWait) Answered() <-chan struct{} { return w.ok }

// Left is the number of replies still to come.
func (w *ReplyWait) Left() int { return w.left }

// References an outbox message carries (buffer.Message.Ref) when it is a
// copy of a message the State also holds: a replay-log Seq (below
// refUnlogged), refLogin with the login record's number, or refUnlogged for
// a keyed unsubscribe, whose effect the log holds without keeping it. The
// session only tells 0 (no copy) from the rest.
const (
	refUnlogged uint64 = 1 << 62
	refLogin    uint64 = 1 << 63
)

// IsLogin reports whether ref, an outbox message's Ref, is a copy of the
// app's login.
func IsLogin(ref uint64) bool { return ref&refLogin != 0 }

// Hide is why an upstream message is kept from the app (log field
// "reason", counters), or Shown.
type Hide uint8

const (
	Shown          Hide = iota
	HideLoginReply      // the reply to a replayed login
	HideReply           // the reply to a replayed request
	HideRepeat          // a message classified Once, seen before a reconnect
	HideAck             // a repeated acknowledgement
)

var hideNames = [...]string{"", "reply to a replayed login", "reply to a replayed request", "seen before a reconnect", "repeated acknowledgement"}

// String is the reason as the logs give it ("" for Shown).
func (h Hide) String() string {
	if int(h) < len(hideNames) {
		return hideNames[h]
	}
	return "Hide(" + strconv.Itoa(int(h)) + ")"
}

// NewState returns the State of a new session of a protocol with caps.
func NewState(caps Capabilities, l Limits) *State {
	st := &State{awaitLogin: caps.AwaitLogin, awaitReplies: caps.AwaitReplies, log: buffer.NewReplayLog(l.MaxMessages, l.MaxBytes)}
	if l.Meter != nil {
		st.log.SetMeter(l.Meter)
	}
	if caps.Acks {
		st.pending = buffer.NewPending(l.Budget, l.Overflow)
		st.acked = buffer.NewRecentIDs(l.MaxMessages)
	}
	st.waits.max = 2*l.MaxMessages + 1
	st.maxFolded = max(l.MaxMessages, 2)
	st.maxDelivered = l.MaxMessages
	return st
}

// Pending is the store of messages sent and waiting for an acknowledgement,
// nil without acks. The session's outbox shares its caps, a restore re-sends
// what it holds (Resend), and a direct send adds to it.
func (st *State) Pending() *buffer.Pending { return st.pending }

// Login returns the app's latest login message as it sent it, nil before
// one. The State never modifies it.
func (st *State) Login() []byte {
	if st.login == nil {
		return nil
	}
	return st.login.msg.Data
}

// Remember records a restorable app message (App.Restorable) and returns
// the reference its queued copies carry. It returns buffer.ErrReplayLogFull
// when the log cannot keep it.
func (st *State) Remember(a App, m buffer.Message) (uint64, error) {
	if a.Kind == AppLogin {
		st.loginN++
		st.login = &loginRecord{msg: m, replyID: a.ReplyID, ref: refLogin | st.loginN}
		return st.login.ref, nil
	}
	op := buffer.ReplaySubscribe
	if a.Kind == AppUnsubscribe {
		op = buffer.ReplayUnsubscribe
	}
	seq, err := st.log.Add(buffer.ReplayEntry{Op: op, Key: a.Key, Keyed: a.Keyed, Message: m, ReplyID: a.ReplyID})
	if seq == 0 {
		return refUnlogged, err
	}
	if a.AtMostOnce && a.Kind == AppSubscribe && a.Keyed {
		if st.once == nil {
			st.once = map[uint64]uint64{}
		}
		st.once[seq] = 0
	}
	return seq, err
}

// Active reports whether the keyed subscription key is in the replay log:
// neither cancelled by the app nor ended by the server nor abandoned.
func (st *State) Active(key string) bool { return st.log.Has(key) }

// sent records that the entry ref went out on connection gen, if it is an
// at-most-once entry.
func (st *State) sent(ref, gen uint64) {
	if _, ok := st.once[ref]; ok {
		st.once[ref] = gen
	}
}

// Snapshot is what one restore re-sends before the outbox, in order.
type Snapshot struct {
	Login   *buffer.Message // nil when the app never logged in
	Wait    *LoginWait      // nil unless the restore waits for the login reply
	Folded  []buffer.Message
	Entries []buffer.ReplayEntry
	// Replies is the wait for the replies to Folded and Entries, nil
	// unless the protocol awaits them and one of them has a ReplyID.
	Replies *ReplyWait
}

// Begin takes the snapshot for a restore of connection gen: the reply
// waits of the previous connection are forgotten (its replies will never
// come), and the replies to what the snapshot re-sends are looked for, in
// send order. The session drops the queued copies of restorable messages
// (non-zero Ref) at the same time: the snapshot covers them.
func (st *State) Begin(gen uint64) Snapshot {
	st.wait, st.replies = nil, nil
	st.waits.reset()
	var s Snapshot
	if a := st.login; a != nil {
		m := a.msg
		s.Login = &m
		st.waits.add(a.replyID, waiter{own: a.answered, ref: a.ref})
		if st.awaitLogin {
			st.wait = &LoginWait{gen: gen, ok: make(chan struct{}), hide: a.answered, ref: a.ref}
			s.Wait = st.wait
		}
	}
	var awaited int
	s.Folded, awaited = st.beginFolded()
	s.Entries = st.log.Entries()
	for _, e := range s.Entries {
		if st.waits.add(e.ReplyID, waiter{own: e.Answered, ref: e.Seq, replay: st.awaitReplies}) && st.awaitReplies {
			awaited++
		}
		st.sent(e.Seq, gen)
	}
	st.onceByKey.begin(gen, s.Entries)
	if awaited > 0 {
		st.replies = &ReplyWait{gen: gen, left: awaited, ok: make(chan struct{})}
		s.Replies = st.replies
	}
	return s
}

// EndReplies stops looking for the replies of w.
func (st *State) EndReplies(w *ReplyWait) {
	if st.replies == w {
		st.replies = nil
	}
}

// replayAnswered counts a reply to a replayed subscription on gen, and
// releases the restore waiting for them with the last.
func (st *State) replayAnswered(gen uint64) {
	w := st.replies
	if w == nil || w.gen != gen || w.left == 0 {
		return
	}
	if w.left--; w.left == 0 {
		close(w.ok)
		st.replies = nil
	}
}

// SentLive records that a restorable message went straight to the live
// connection gen: its reply is the app's.
func (st *State) SentLive(a App, ref, gen uint64) {
	st.waits.add(a.ReplyID, waiter{ref: ref})
	st.sent(ref, gen)
}

// Flushed records that a queued message is about to be sent on connection
// gen.
func (st *State) Flushed(m buffer.Message, gen uint64) {
	if m.ID != "" && st.pending != nil {
		st.pending.Move(m, gen)
	}
	if m.Ref != 0 {
		st.waits.add(st.replyIDOf(m.Ref), waiter{ref: m.Ref})
		st.sent(m.Ref, gen)
	}
}

// Unflushed undoes Flushed for a message that could not be sent.
func (st *State) Unflushed(m buffer.Message) {
	if m.ID != "" && st.pending != nil {
		st.pending.Remove(m.ID)
	}
}

func (st *State) replyIDOf(ref uint64) string {
	switch {
	case ref&refLogin != 0:
		if st.login != nil && st.login.ref == ref {
			return st.login.replyID
		}
	case ref < refUnlogged:
		if e, ok := st.log.Get(ref); ok {
			return e.ReplyID
		}
	}
	return ""
}

// Lost forgets what concerned connection gen, and returns the
// at-most-once entries sent on it (or before it) that the server had not
// ended: they leave the log, in log order, and the app is told they are
// lost (Capabilities.Abandoned) rather than have them run again.
func (st *State) Lost(gen uint64) []Entry {
	if st.wait != nil && st.wait.gen == gen {
		st.wait = nil
	}
	if st.deliveredGen == gen {
		st.delivered = nil
	}
	if st.replies != nil && st.replies.gen == gen {
		st.replies = nil
	}
	var lost []buffer.ReplayEntry
	for seq, on := range st.once {
		e, ok := st.log.Get(seq)
		switch {
		case !ok:
			delete(st.once, seq) // cancelled or ended meanwhile
		case on != 0 && on <= gen:
			delete(st.once, seq)
			lost = append(lost, e)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	slices.SortFunc(lost, func(a, b buffer.ReplayEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]Entry, len(lost))
	for i, e := range lost {
		st.log.Add(buffer.ReplayEntry{Op: buffer.ReplayUnsubscribe, Key: e.Key, Keyed: true})
		out[i] = Entry{Message: e.Message.Data, Key: e.Key, Keyed: true, Op: AppSubscribe}
	}
	return out
}

// EndWait stops looking for the login reply of w.
func (st *State) EndWait(w *LoginWait) {
	if st.wait == w {
		st.wait = nil
	}
}

// Upstream applies one upstream message from connection gen to the state
// and returns why it is hidden from the app, or Shown. Every rule updates
// its state whether or not another one hides the message (docs/design.md:
// "A hidden message still updates state"); what records that the app has
// seen something applies only when it is forwarded.
func (st *State) Upstream(gen uint64, u Upstream) Hide {
	hide, _ := st.UpstreamReply(gen, u)
	return hide
}

// Replied is the logged subscription an upstream reply answers.
type Replied struct {
	Entry Entry
	Own   bool // it answers tether's replay
	seq   uint64
}

// UpstreamReply is Upstream that also returns the logged subscription the
// message answers by its reply id, nil when none (Capabilities.Reply).
func (st *State) UpstreamReply(gen uint64, u Upstream) (Hide, *Replied) {
	hide := Shown
	var replied *Replied
	var seen []uint64 // requests whose reply this is, if it reaches the app
	if u.LoginOK {
		if h, ref := st.loginReply(gen); h {
			hide = HideLoginReply
		} else if ref != 0 {
			seen = append(seen, ref)
		}
	}
	if u.ReplyID != "" {
		w, ok := st.waits.take(u.ReplyID)
		if ok && w.replay {
			st.replayAnswered(gen)
		}
		if ok && w.own {
			hide = firstOf(hide, HideReply)
		} else if ok {
			seen = append(seen, w.ref)
		}
		if e, logged := st.entryOf(w.ref); ok && logged {
			replied = &Replied{Entry: e, Own: w.own, seq: w.ref}
		}
	}
	if u.Ack && st.ack(u.AckID) {
		hide = firstOf(hide, HideAck)
	}
	if u.Once && (u.OnceKeyed && st.onceByKey.own(gen, u.OnceKey) || !u.OnceKeyed && st.seenOnce) {
		hide = firstOf(hide, HideRepeat)
	}
	if u.KeepaliveReply {
		st.pings.answered(gen)
	}
	if u.Ping {
		st.asked = asked{gen: gen, pinged: true}
	}
	if u.DeliveryID != "" {
		st.deliver(gen, u.DeliveryID)
	}
	if u.Ends {
		// A fresh connection would not serve it: it is no longer replayed.
		st.log.Add(buffer.ReplayEntry{Op: buffer.ReplayUnsubscribe, Key: u.EndKey, Keyed: true})
	}
	if hide == Shown {
		st.seenOnce = st.seenOnce || u.Once && !u.OnceKeyed
		if u.Once && u.OnceKeyed {
			st.onceByKey.seen(u.OnceKey)
		}
		for _, ref := range seen {
			st.answered(ref)
		}
	}
	return hide, replied
}

// entryOf is the log entry ref names, as a Replayer sees it.
func (st *State) entryOf(ref uint64) (Entry, bool) {
	if ref == 0 || ref >= refUnlogged {
		return Entry{}, false
	}
	e, ok := st.log.Get(ref)
	if !ok {
		return Entry{}, false
	}
	op := AppSubscribe
	if e.Op == buffer.ReplayUnsubscribe {
		op = AppUnsubscribe
	}
	return Entry{Message: e.Message.Data, Key: e.Key, Keyed: e.Keyed, Op: op}, true
}

// Answered applies what the protocol made of a reply to r
// (Capabilities.Reply): the subscription's message rewritten, or ended.
// A rewrite the log has no room for is refused with ErrReplayLogFull, and
// the entry keeps its message.
func (st *State) Answered(r *Replied, a Answer) error {
	e, ok := st.log.Get(r.seq)
	if !ok {
		return nil
	}
	if a.End && e.Keyed {
		st.log.Add(buffer.ReplayEntry{Op: buffer.ReplayUnsubscribe, Key: e.Key, Keyed: true})
		return nil
	}
	if a.Log == nil {
		return nil
	}
	m := e.Message
	m.Data = append([]byte(nil), a.Log...)
	return st.log.SetMessage(r.seq, m)
}

func firstOf(a, b Hide) Hide {
	if a != Shown {
		return a
	}
	return b
}

// loginReply handles a message classified LoginOK: it releases a restore
// waiting for it on gen and says whether it is hidden; otherwise it returns
// the login record it answers.
func (st *State) loginReply(gen uint64) (hide bool, ref uint64) {
	if w := st.wait; w != nil && w.gen == gen && !w.done {
		w.done = true
		close(w.ok)
		return w.hide, w.ref
	}
	if st.login != nil && !st.login.answered {
		return false, st.login.ref
	}
	return false, 0
}

// ack handles an acknowledgement and reports whether it is a repeat: the
// id was already acknowledged and nothing with it is pending.
func (st *State) ack(id string) bool {
	if st.pending == nil {
		return false
	}
	if _, ok := st.pending.Remove(id); ok {
		st.acked.Add(id)
		return false
	}
	return st.acked.Contains(id)
}

// answered records that the app has seen the reply to the request ref.
func (st *State) answered(ref uint64) {
	switch {
	case ref&refLogin != 0:
		if st.login != nil && st.login.ref == ref {
			st.login.answered = true
		}
	case ref != 0 && ref < refUnlogged:
		st.log.SetAnswered(ref, true)
	}
}

// deliver records that connection gen delivered a message the app may
// settle by id. A newer connection starts a new set: what the older ones
// delivered can no longer be settled. The set keeps the last MaxMessages
// ids; the app settling an older one is taken for a stale settlement.
func (st *State) deliver(gen uint64, id string) {
	if st.delivered == nil || st.deliveredGen != gen {
		st.delivered, st.deliveredGen = buffer.NewRecentIDs(max(st.maxDelivered, 1)), gen
	}
	st.delivered.Add(id)
}

// Delivered reports whether connection gen, still live, delivered the
// message the app settles with id (App.DeliveryID).
func (st *State) Delivered(gen uint64, id string) bool {
	return st.delivered != nil && st.deliveredGen == gen && st.delivered.Contains(id)
}
