package buffer

import (
	"fmt"
	"strconv"
)

// Message is one whole WebSocket message from the app.
type Message struct {
	// Binary is true for a binary message and false for a text message, so
	// the message is re-sent with the opcode the app chose.
	Binary bool
	// Data is the payload. Once pushed, the outbox owns it: the caller must
	// not modify or reuse the slice until it gets the message back from
	// Pop or in a dropped list.
	Data []byte
	// ID is the message's acknowledgement id (TETHER_ACK_ID_PATH), "" when
	// it is not tracked. Once sent, a message with an ID moves to [Pending]
	// until its acknowledgement arrives.
	ID string
	// Ref is the owner's reference to other state that also holds this
	// message (the session marks copies of messages it keeps for replay).
	// The stores only carry it; 0 means none.
	Ref uint64
}

// Overflow is what [Outbox.Push] does with a message that does not fit
// (TETHER_OUTBOX_OVERFLOW).
type Overflow int

const (
	// OverflowClose refuses the message: Push returns ErrOutboxFull and the
	// session closes the app with 1013, so the app learns that its messages
	// were not delivered instead of losing some silently.
	OverflowClose Overflow = iota
	// OverflowDropOldest evicts messages from the head until the new one fits,
	// for apps whose latest message supersedes older ones.
	OverflowDropOldest
	// OverflowDropNewest drops the message being pushed and keeps the queue.
	OverflowDropNewest
)

// overflowNames are the TETHER_OUTBOX_OVERFLOW spellings, indexed by policy.
var overflowNames = [...]string{
	OverflowClose:      "close",
	OverflowDropOldest: "drop-oldest",
	OverflowDropNewest: "drop-newest",
}

// String returns the configuration spelling of o: "close", "drop-oldest" or
// "drop-newest", and "Overflow(N)" for a value outside the enum.
func (o Overflow) String() string {
	if o < 0 || int(o) >= len(overflowNames) {
		return "Overflow(" + strconv.Itoa(int(o)) + ")"
	}
	return overflowNames[o]
}

// ParseOverflow parses a policy name as spelled by [Overflow.String]. The
// match is exact: a configuration typo must fail loudly, not select a default.
func ParseOverflow(s string) (Overflow, error) {
	for o, name := range overflowNames {
		if s == name {
			return Overflow(o), nil
		}
	}
	return 0, fmt.Errorf("invalid overflow policy %q: want close, drop-oldest or drop-newest", s)
}

// UnmarshalText implements encoding.TextUnmarshaler, so configuration
// parsers (caarlos0/env) can fill an Overflow field directly.
func (o *Overflow) UnmarshalText(b []byte) error {
	p, err := ParseOverflow(string(b))
	if err != nil {
		return err
	}
	*o = p
	return nil
}

const (
	// minRing is the smallest ring allocated. The ring starts empty, because
	// most sessions never queue anything, and never shrinks below this, so
	// a short outage does not cause a resize per message.
	minRing = 8
	// maxKeptDropped bounds the capacity of the reused dropped slice, so one
	// large eviction does not pin a big array for the session's lifetime.
	maxKeptDropped = 64
)

// Outbox is a FIFO of app messages capped by message count and total bytes
// (TETHER_OUTBOX_MAX_MESSAGES, TETHER_OUTBOX_MAX_BYTES). The caps are a
// [Budget], which the session shares with its [Pending] acknowledgements.
// It is a ring buffer that grows by doubling and halves when it is
// three-quarters empty, so memory follows the backlog rather than its
// historical peak.
//
// An Outbox is not safe for concurrent use; its session serializes access.
type Outbox struct {
	budget *Budget  // the caps, possibly shared with older
	older  *Pending // evicted before the outbox's own messages; may be nil
	policy Overflow

	ring  []Message // len is a power of two (or zero), so indexes wrap with a mask
	head  int       // index of the oldest message
	count int       // messages held
	bytes int       // sum of len(Data) over the messages held

	dropped []Message // reused by Push so the common path does not allocate
}

// NewOutbox returns an empty outbox with caps of its own. It panics when a
// cap is not positive or the policy is unknown: configuration validation
// rejects those values first, so reaching here with one is a programming
// error.
func NewOutbox(maxMessages, maxBytes int, policy Overflow) *Outbox {
	if maxMessages <= 0 || maxBytes <= 0 {
		panic(fmt.Sprintf("buffer: NewOutbox caps must be > 0, got %d messages and %d bytes", maxMessages, maxBytes))
	}
	return NewSharedOutbox(NewBudget(maxMessages, maxBytes), nil, policy)
}

// NewSharedOutbox returns an empty outbox drawing on budget. older, when not
// nil, is the store of messages sent before any queued one (the session's
// Pending, sharing the same budget): under OverflowDropOldest its messages
// are the oldest, so they are evicted first. It panics on an unknown policy.
func NewSharedOutbox(budget *Budget, older *Pending, policy Overflow) *Outbox {
	checkPolicy("NewOutbox", policy)
	return &Outbox{budget: budget, older: older, policy: policy}
}

func checkPolicy(fn string, policy Overflow) {
	if policy < 0 || int(policy) >= len(overflowNames) {
		panic("buffer: " + fn + " with unknown policy " + policy.String())
	}
}

// Push appends m at the tail.
//
// When m does not fit: with OverflowClose, Push returns ErrOutboxFull and
// keeps nothing (m is still the caller's); with OverflowDropOldest it evicts
// messages from the head until m fits and returns them; with
// OverflowDropNewest it returns m itself as dropped. A message larger than
// maxBytes can never fit: it gets ErrOutboxFull under OverflowClose and is
// returned as dropped under both drop policies, without evicting anything.
//
// dropped is nil when nothing was dropped. Otherwise it is a slice owned by
// the outbox, valid until the next call to Push; the dropped messages
// themselves belong to the caller again.
func (o *Outbox) Push(m Message) (dropped []Message, err error) {
	o.resetDropped()
	size := len(m.Data)
	if !o.budget.fits(size) {
		switch {
		case o.policy == OverflowClose:
			return nil, ErrOutboxFull
		case o.policy == OverflowDropNewest || size > o.budget.maxBytes:
			o.dropped = append(o.dropped, m)
			return o.dropped, nil
		}
		o.evictFor(size)
		if !o.budget.fits(size) {
			// Everything evicted, and the memory budget still has no
			// room (Budget.SetMeter): m is dropped too.
			o.dropped = append(o.dropped, m)
			return o.dropped, nil
		}
	}
	o.pushBack(m)
	if len(o.dropped) == 0 {
		return nil, nil
	}
	return o.dropped, nil
}

// Pop removes and returns the oldest message; ok is false when the outbox is
// empty.
func (o *Outbox) Pop() (m Message, ok bool) {
	if o.count == 0 {
		return Message{}, false
	}
	m = o.ring[o.head]
	// Clear the slot so the ring does not keep the payload reachable after
	// the caller has sent it.
	o.ring[o.head] = Message{}
	o.head = (o.head + 1) & (len(o.ring) - 1)
	o.count--
	o.bytes -= len(m.Data)
	o.budget.release(len(m.Data))
	o.maybeShrink()
	return m, true
}

// PushFront puts m back at the head: the caller popped it, could not send
// it, and must keep the order. It ignores the caps because m was already
// admitted once; refusing it now would lose a message the app was told
// nothing about. Later Pushes see the outbox as full until it drains below
// the caps again.
func (o *Outbox) PushFront(m Message) {
	o.growIfFull()
	o.head = (o.head - 1) & (len(o.ring) - 1)
	o.ring[o.head] = m
	o.count++
	o.bytes += len(m.Data)
	o.budget.take(len(m.Data))
}

// Len returns the number of messages held.
func (o *Outbox) Len() int { return o.count }

// Bytes returns the total payload size of the messages held.
func (o *Outbox) Bytes() int { return o.bytes }

// DeleteFunc removes every queued message for which del returns true,
// keeping the others in order, and returns how many it removed. The session
// uses it to discard queued copies of messages a restore replays anyway.
func (o *Outbox) DeleteFunc(del func(Message) bool) int {
	n := o.count
	removed := 0
	for range n {
		m, _ := o.Pop()
		if del(m) {
			removed++
			continue
		}
		o.pushBack(m)
	}
	return removed
}

// evictFor evicts into o.dropped, oldest first, until a message of size
// bytes fits: first the older store's messages (already sent once, so
// evicting one only gives up its re-send), then the outbox's own head. The
// caller guarantees size <= maxBytes, so once both are empty it fits the
// caps and the loop ends; the memory budget may still refuse it (Push
// checks).
func (o *Outbox) evictFor(size int) {
	for !o.budget.fits(size) {
		if old, ok := o.older.evictOldest(); ok {
			o.dropped = append(o.dropped, old)
			continue
		}
		old, ok := o.Pop()
		if !ok {
			return
		}
		o.dropped = append(o.dropped, old)
	}
}

// resetDropped forgets the previous Push's dropped list. Clearing releases
// the payloads, which now belong to the caller, before the slice is reused.
func (o *Outbox) resetDropped() {
	clear(o.dropped)
	if cap(o.dropped) > maxKeptDropped {
		o.dropped = nil
		return
	}
	o.dropped = o.dropped[:0]
}

func (o *Outbox) pushBack(m Message) {
	o.growIfFull()
	o.ring[(o.head+o.count)&(len(o.ring)-1)] = m
	o.count++
	o.bytes += len(m.Data)
	o.budget.take(len(m.Data))
}

func (o *Outbox) growIfFull() {
	if o.count < len(o.ring) {
		return
	}
	o.resize(max(minRing, 2*len(o.ring)))
}

// maybeShrink halves the ring when at most a quarter of it is used. Waiting
// for a quarter, not a half, keeps a queue that oscillates around a power of
// two from resizing on every Push and Pop.
func (o *Outbox) maybeShrink() {
	if len(o.ring) > minRing && o.count <= len(o.ring)/4 {
		o.resize(len(o.ring) / 2)
	}
}

// resize moves the messages, oldest first, into a new ring of size n.
func (o *Outbox) resize(n int) {
	ring := make([]Message, n)
	if o.count > 0 {
		end := o.head + o.count
		if end <= len(o.ring) {
			copy(ring, o.ring[o.head:end])
		} else {
			k := copy(ring, o.ring[o.head:])
			copy(ring[k:], o.ring[:end-len(o.ring)])
		}
	}
	o.ring = ring
	o.head = 0
}
