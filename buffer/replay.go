package buffer

import (
	"fmt"
	"sort"
	"strconv"
)

// ReplayOp is what a logged app message does to its subscriptions.
type ReplayOp uint8

const (
	// ReplaySubscribe is a message matching TETHER_SUBSCRIBE_MATCH.
	ReplaySubscribe ReplayOp = iota
	// ReplayUnsubscribe is a message matching TETHER_UNSUBSCRIBE_MATCH.
	ReplayUnsubscribe
)

// String returns "subscribe" or "unsubscribe".
func (op ReplayOp) String() string {
	switch op {
	case ReplaySubscribe:
		return "subscribe"
	case ReplayUnsubscribe:
		return "unsubscribe"
	}
	return "ReplayOp(" + strconv.Itoa(int(op)) + ")"
}

// ReplayEntry is one logged app message.
type ReplayEntry struct {
	Op ReplayOp
	// Key is the value at TETHER_SUBSCRIPTION_KEY; it is meaningful only
	// when Keyed is true (the variable is set and the message has a value
	// there). Entries without a key are kept verbatim, in order.
	Key   string
	Keyed bool
	// Message is the app's message, replayed as is. Its Data must not be
	// modified once logged: Entries shares it.
	Message Message
	// ReplyID is the request id a reply to this message carries
	// (TETHER_REPLY_ID_PATH), "" when none; Answered records that the app
	// has seen that reply. The log only keeps them for the session, which
	// decides from them whether a reply to the replayed message is hidden.
	ReplyID  string
	Answered bool
	// Seq is set by Add: it rises with every entry added, so it names an
	// entry for Get and SetAnswered and orders entries as the app sent them.
	Seq uint64
}

// ReplayLog is the ordered, compacting log of an app's subscribe and
// unsubscribe messages, replayed on every new upstream connection so the
// server, which remembers nothing across connections, serves the same
// subscriptions again (docs/design.md "Restoring the application").
//
// Compaction, with a subscription key:
//   - an unsubscribe removes the subscribe with the same key and is not
//     kept itself: a fresh connection starts with no subscriptions, so there
//     is nothing for it to undo;
//   - a repeated subscribe replaces the earlier one and moves to the end of
//     the log. Moving keeps "latest action last": an entry without a key
//     logged in between (say an "unsubscribe all") is replayed before the
//     new subscribe, as the app sent it, not after.
//
// Entries without a key (TETHER_SUBSCRIPTION_KEY unset, or a message with
// no value there) are opaque: they are all kept, in order, and a keyed
// unsubscribe never cancels them. The log therefore never changes the
// outcome of replaying everything the app sent; it only leaves out what
// cancels out. The log is bounded by message count and bytes; Add refuses
// an entry that would exceed either with ErrReplayLogFull and leaves the
// log unchanged, and the session closes the app with 1013 "replay log full"
// rather than silently replay a partial subscription set. With a meter
// (SetMeter), the bytes an entry adds must also be granted by the session's
// memory budget, or Add refuses it the same way.
//
// A ReplayLog is not safe for concurrent use; its session serializes access.
type ReplayLog struct {
	maxMessages int
	maxBytes    int

	slots []replaySlot // in replay order (rising Seq); removed entries are holes
	count int          // entries held (slots that are not holes)
	bytes int          // sum of len(Message.Data) over them
	keys  map[string]uint64
	seq   uint64 // Seq of the last entry added

	// meter, when set, is the session's account on tether's memory budget
	// (SetMeter): the log's bytes are counted on it as well.
	meter Meter
}

// SetMeter counts the log's payload bytes on m as well, from now on: an
// entry is kept only when m also gives the bytes it adds. It is called
// before the log holds anything.
func (l *ReplayLog) SetMeter(m Meter) { l.meter = m }

type replaySlot struct {
	e    ReplayEntry
	hole bool
}

// NewReplayLog returns an empty log. It panics when a cap is not positive.
func NewReplayLog(maxMessages, maxBytes int) *ReplayLog {
	if maxMessages <= 0 || maxBytes <= 0 {
		panic(fmt.Sprintf("buffer: NewReplayLog caps must be > 0, got %d messages and %d bytes", maxMessages, maxBytes))
	}
	return &ReplayLog{maxMessages: maxMessages, maxBytes: maxBytes, keys: map[string]uint64{}}
}

// Add logs e (its Seq is ignored) and returns the Seq it got, or 0 when the
// entry is not kept (a keyed unsubscribe). It returns ErrReplayLogFull, and
// changes nothing, when keeping e would exceed a cap.
func (l *ReplayLog) Add(e ReplayEntry) (uint64, error) {
	old, replaced := l.keyed(e)
	if e.Keyed && e.Op == ReplayUnsubscribe {
		if replaced {
			l.release(l.remove(old))
		}
		return 0, nil
	}
	count, bytes := l.count+1, l.bytes+len(e.Message.Data)
	if replaced {
		count--
		bytes -= len(l.slots[old].e.Message.Data)
	}
	if count > l.maxMessages || bytes > l.maxBytes {
		return 0, ErrReplayLogFull
	}
	grow := bytes - l.bytes
	if grow > 0 && l.meter != nil && !l.meter.TryReserve(int64(grow)) {
		return 0, ErrReplayLogFull
	}
	if replaced {
		l.remove(old)
		l.release(-grow) // a replacement smaller than the entry it replaces
	}
	l.seq++
	e.Seq = l.seq
	if e.Keyed {
		l.keys[e.Key] = e.Seq
	}
	l.slots = append(l.slots, replaySlot{e: e})
	l.count++
	l.bytes += len(e.Message.Data)
	return e.Seq, nil
}

// keyed returns the slot of the subscribe e cancels or replaces.
func (l *ReplayLog) keyed(e ReplayEntry) (int, bool) {
	if !e.Keyed {
		return 0, false
	}
	seq, ok := l.keys[e.Key]
	if !ok {
		return 0, false
	}
	return l.find(seq)
}

// Entries returns the entries to replay, in order. The slice is new; the
// payloads are shared with the log and must not be modified.
func (l *ReplayLog) Entries() []ReplayEntry {
	out := make([]ReplayEntry, 0, l.count)
	for _, s := range l.slots {
		if !s.hole {
			out = append(out, s.e)
		}
	}
	return out
}

// Get returns the entry with seq, if it is still in the log.
func (l *ReplayLog) Get(seq uint64) (ReplayEntry, bool) {
	i, ok := l.find(seq)
	if !ok {
		return ReplayEntry{}, false
	}
	return l.slots[i].e, true
}

// Has reports whether a keyed subscribe with key is in the log.
func (l *ReplayLog) Has(key string) bool {
	_, ok := l.keys[key]
	return ok
}

// Subscribed returns the keyed subscribe with key, if it is in the log.
func (l *ReplayLog) Subscribed(key string) (ReplayEntry, bool) {
	seq, ok := l.keys[key]
	if !ok {
		return ReplayEntry{}, false
	}
	return l.Get(seq)
}

// SetAnswered records whether the app has seen the reply to the entry with
// seq; it does nothing when that entry has left the log.
func (l *ReplayLog) SetAnswered(seq uint64, answered bool) {
	if i, ok := l.find(seq); ok {
		l.slots[i].e.Answered = answered
	}
}

// SetMessage replaces the message of the entry with seq, keeping its place
// and key; it does nothing when that entry has left the log, and returns
// ErrReplayLogFull, changing nothing, when the new message would exceed the
// byte cap.
func (l *ReplayLog) SetMessage(seq uint64, m Message) error {
	i, ok := l.find(seq)
	if !ok {
		return nil
	}
	bytes := l.bytes - len(l.slots[i].e.Message.Data) + len(m.Data)
	if bytes > l.maxBytes {
		return ErrReplayLogFull
	}
	l.slots[i].e.Message = m
	l.bytes = bytes
	return nil
}

// Len returns the number of entries held.
func (l *ReplayLog) Len() int { return l.count }

// Bytes returns the total payload size of the entries held.
func (l *ReplayLog) Bytes() int { return l.bytes }

// find returns the slot holding seq. Slots are in rising Seq order, holes
// included, so a binary search finds it.
func (l *ReplayLog) find(seq uint64) (int, bool) {
	i := sort.Search(len(l.slots), func(i int) bool { return l.slots[i].e.Seq >= seq })
	if i == len(l.slots) || l.slots[i].e.Seq != seq || l.slots[i].hole {
		return 0, false
	}
	return i, true
}

// remove turns slot i into a hole and returns the bytes it held, which the
// caller gives back to the meter. The hole keeps its Seq, so the slots stay
// sorted for find, but not its payload.
func (l *ReplayLog) remove(i int) int {
	e := l.slots[i].e
	if e.Keyed {
		delete(l.keys, e.Key)
	}
	l.slots[i] = replaySlot{e: ReplayEntry{Seq: e.Seq}, hole: true}
	l.count--
	l.bytes -= len(e.Message.Data)
	l.maybeCompact()
	return len(e.Message.Data)
}

// release gives n bytes back to the meter, if there is one and n > 0.
func (l *ReplayLog) release(n int) {
	if l.meter != nil && n > 0 {
		l.meter.Release(int64(n))
	}
}

// maybeCompact squeezes the holes out once they outnumber the entries (with
// some slack), so repeated subscribe/unsubscribe cycles cost O(1) amortized
// and memory follows the subscription set, not the app's history.
func (l *ReplayLog) maybeCompact() {
	if len(l.slots)-l.count <= l.count+minRing {
		return
	}
	slots := make([]replaySlot, 0, max(minRing, 2*l.count))
	for _, s := range l.slots {
		if !s.hole {
			slots = append(slots, s)
		}
	}
	l.slots = slots
}
