package buffer

import "fmt"

// Budget is a message-count and byte cap shared by the stores that hold one
// session's app messages: the [Outbox] (messages not yet sent) and
// [Pending] (messages sent and waiting for an acknowledgement). DESIGN.md
// says pending messages count against the outbox caps; sharing one Budget
// is how, without either store knowing the other's size.
//
// A Budget is not safe for concurrent use; its session serializes access.
type Budget struct {
	maxMessages int
	maxBytes    int
	messages    int // held by all the stores drawing on the budget
	bytes       int // sum of len(Data) over those messages
}

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
func (b *Budget) fits(size int) bool {
	return b.messages < b.maxMessages && size <= b.maxBytes-b.bytes
}

func (b *Budget) take(size int) {
	b.messages++
	b.bytes += size
}

func (b *Budget) release(size int) {
	b.messages--
	b.bytes -= size
}
