package buffer

import "fmt"

// Budget is a message-count and byte cap shared by the stores that hold one
// session's app messages: the [Outbox] (messages not yet sent) and
// [Pending] (messages sent and waiting for an acknowledgement). docs/design.md
// says pending messages count against the outbox caps; sharing one Budget
// is how, without either store knowing the other's size.
//
// A Budget is not safe for concurrent use; its session serializes access.
type Budget struct {
	maxMessages int
	maxBytes    int
	messages    int // held by all the stores drawing on the budget
	bytes       int // sum of len(Data) over those messages

	// meter, when set, is the session's account on tether's memory budget
	// (SetMeter); reserved is what fits took from it for the next take.
	meter    Meter
	reserved int
}

// Meter is the session's account on tether's one memory budget
// (internal/budget's Account, TETHER_MEMORY_LIMIT): a message fits only
// when the meter also gives its bytes, so a full memory budget makes the
// stores' overflow policy apply as their own caps do. It must be safe to
// call from the session's goroutines and must not block.
type Meter interface {
	TryReserve(n int64) bool // take n bytes if they fit
	Reserve(n int64)         // take n bytes whether or not they fit
	Release(n int64)         // give n bytes back
}

// SetMeter counts the budget's bytes on m as well, from now on. It is
// called before any store holds a message.
func (b *Budget) SetMeter(m Meter) { b.meter = m }

// NewBudget returns an empty budget. It panics when a cap is not positive:
// configuration validation rejects those values first.
func NewBudget(maxMessages, maxBytes int) *Budget {
	if maxMessages <= 0 || maxBytes <= 0 {
		panic(fmt.Sprintf("buffer: NewBudget caps must be > 0, got %d messages and %d bytes", maxMessages, maxBytes))
	}
	return &Budget{maxMessages: maxMessages, maxBytes: maxBytes}
}

// Messages returns the number of messages held against the budget.
func (b *Budget) Messages() int { return b.messages }

// Bytes returns the payload bytes held against the budget.
func (b *Budget) Bytes() int { return b.bytes }

// MaxMessages returns the message cap.
func (b *Budget) MaxMessages() int { return b.maxMessages }

// MaxBytes returns the byte cap.
func (b *Budget) MaxBytes() int { return b.maxBytes }

// fits reports whether one more message of size bytes stays within the caps.
// The subtraction form cannot overflow; it is negative, hence false, when a
// re-admitted message has taken the budget above its byte cap.
//
// With a meter, the message's bytes must also be granted by it: they are
// taken from it here, for the take that follows to count.
func (b *Budget) fits(size int) bool {
	if b.messages >= b.maxMessages || size > b.maxBytes-b.bytes {
		return false
	}
	if b.meter == nil || b.reserved >= size {
		return true
	}
	if !b.meter.TryReserve(int64(size - b.reserved)) {
		return false
	}
	b.reserved = size
	return true
}

func (b *Budget) take(size int) {
	b.messages++
	b.bytes += size
	if b.meter == nil {
		return
	}
	// What fits took pays for size; the rest is given back, and a message
	// admitted regardless of the caps (PushFront, Move) is counted anyway.
	switch d := size - b.reserved; {
	case d > 0:
		b.meter.Reserve(int64(d))
	case d < 0:
		b.meter.Release(int64(-d))
	}
	b.reserved = 0
}

func (b *Budget) release(size int) {
	b.messages--
	b.bytes -= size
	if b.meter != nil {
		b.meter.Release(int64(size))
	}
}
