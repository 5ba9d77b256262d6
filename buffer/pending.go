package buffer

// Pending holds app messages that were sent upstream and wait for an
// acknowledgement carrying their id (TETHER_ACK_ID_PATH, TETHER_ACK_MATCH),
// in the order they were first sent. After a reconnect the session re-sends
// those not yet acknowledged, in that order; the server deduplicates by id.
//
// Its messages count against a [Budget] shared with the session's [Outbox]
// (docs/design.md: "Pending messages count against the outbox caps"). Memory is
// a slice in first-send order in which acknowledged messages leave holes; the
// holes are squeezed out once they outnumber the messages held, so each
// operation costs O(1) amortized, and acknowledgements that arrive in order
// (the common case) only ever remove from the front.
//
// A Pending is not safe for concurrent use; its session serializes access.
type Pending struct {
	budget *Budget
	policy Overflow

	slots []pendingSlot // first-send order; slots[:head] are all holes
	head  int
	index map[string]int // id → position in slots
	count int            // messages held (slots that are not holes)
	bytes int            // sum of len(Data) over them

	dropped []Message // reused by Add so the common path does not allocate
}

type pendingSlot struct {
	m    Message
	gen  uint64 // the connection it was last sent on
	hole bool   // acknowledged, evicted or replaced
}

// NewPending returns an empty store drawing on budget. Messages that do not
// fit follow policy, as in the outbox. It panics on an unknown policy.
func NewPending(budget *Budget, policy Overflow) *Pending {
	checkPolicy("NewPending", policy)
	return &Pending{budget: budget, policy: policy, index: map[string]int{}}
}

// Add records m, just sent on connection gen, as waiting for its
// acknowledgement. m.ID must not be empty.
//
// A message already pending with the same id is replaced: the server
// deduplicates by id, so it knows one message per id, and only the latest is
// kept and re-sent. That is not a drop and is not reported.
//
// When m does not fit: with OverflowClose, Add returns ErrOutboxFull and
// does not keep m; with OverflowDropOldest it evicts the oldest pending
// messages (the outbox's own are newer: it is empty while messages are sent
// directly) and returns them; with OverflowDropNewest it returns m itself
// ([Pending.Has] then reports false). dropped is owned by the Pending and
// valid until the next call to Add.
func (p *Pending) Add(m Message, gen uint64) (dropped []Message, err error) {
	p.resetDropped()
	p.Remove(m.ID)
	size := len(m.Data)
	if !p.budget.fits(size) {
		switch {
		case p.policy == OverflowClose:
			return p.result(ErrOutboxFull)
		case p.policy == OverflowDropNewest || size > p.budget.maxBytes:
			p.dropped = append(p.dropped, m)
			return p.result(nil)
		}
		for !p.budget.fits(size) {
			old, ok := p.evictOldest()
			if !ok {
				if p.budget.meter == nil {
					break
				}
				// The memory budget has no room (Budget.SetMeter): m
				// is dropped too.
				p.dropped = append(p.dropped, m)
				return p.result(nil)
			}
			p.dropped = append(p.dropped, old)
		}
	}
	p.push(m, gen)
	return p.result(nil)
}

// Move records m, taken from the outbox and about to be sent on connection
// gen, as waiting for its acknowledgement. It ignores the caps: m was
// admitted to the budget when it was queued, and Pop released exactly what
// Move takes. A message already pending with the same id is replaced, as in
// Add.
func (p *Pending) Move(m Message, gen uint64) {
	p.Remove(m.ID)
	p.push(m, gen)
}

// Has reports whether a message with id is pending.
func (p *Pending) Has(id string) bool {
	_, ok := p.index[id]
	return ok
}

// Remove takes the message with id out of the store: its acknowledgement
// arrived, or it goes back to the outbox. ok is false when no message with
// that id is pending.
func (p *Pending) Remove(id string) (m Message, ok bool) {
	i, ok := p.index[id]
	if !ok {
		return Message{}, false
	}
	return p.removeAt(i), true
}

// Resend returns the pending messages last sent on a connection older than
// gen, in first-send order, and records them as sent on gen: each is
// returned once per connection, however often Resend is called for it.
func (p *Pending) Resend(gen uint64) []Message {
	var out []Message
	for i := p.head; i < len(p.slots); i++ {
		s := &p.slots[i]
		if s.hole || s.gen >= gen {
			continue
		}
		s.gen = gen
		out = append(out, s.m)
	}
	return out
}

// Len returns the number of messages pending.
func (p *Pending) Len() int { return p.count }

// Bytes returns the total payload size of the messages pending.
func (p *Pending) Bytes() int { return p.bytes }

// evictOldest removes and returns the message sent first. It is nil-safe,
// so an outbox without acknowledgements can call it unconditionally.
func (p *Pending) evictOldest() (Message, bool) {
	if p == nil || p.count == 0 {
		return Message{}, false
	}
	return p.removeAt(p.head), true
}

func (p *Pending) push(m Message, gen uint64) {
	p.index[m.ID] = len(p.slots)
	p.slots = append(p.slots, pendingSlot{m: m, gen: gen})
	p.count++
	p.bytes += len(m.Data)
	p.budget.take(len(m.Data))
}

// removeAt turns slot i, which holds a message, into a hole.
func (p *Pending) removeAt(i int) Message {
	s := &p.slots[i]
	m := s.m
	delete(p.index, m.ID)
	// Clear the payload so the hole does not keep it reachable.
	*s = pendingSlot{hole: true}
	p.count--
	p.bytes -= len(m.Data)
	p.budget.release(len(m.Data))
	for p.head < len(p.slots) && p.slots[p.head].hole {
		p.head++
	}
	p.maybeCompact()
	return m
}

// maybeCompact squeezes the holes out once they outnumber the messages
// (with some slack, so a small store does not copy on every removal).
func (p *Pending) maybeCompact() {
	holes := len(p.slots) - p.count
	if holes <= p.count+minRing {
		return
	}
	slots := make([]pendingSlot, 0, max(minRing, 2*p.count))
	for _, s := range p.slots[p.head:] {
		if !s.hole {
			p.index[s.m.ID] = len(slots)
			slots = append(slots, s)
		}
	}
	p.slots, p.head = slots, 0
}

func (p *Pending) resetDropped() {
	clear(p.dropped)
	if cap(p.dropped) > maxKeptDropped {
		p.dropped = nil
		return
	}
	p.dropped = p.dropped[:0]
}

func (p *Pending) result(err error) ([]Message, error) {
	if len(p.dropped) == 0 {
		return nil, err
	}
	return p.dropped, err
}
