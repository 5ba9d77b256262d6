package protocol

// Carry is what a Framer whose units may span WebSocket messages keeps
// between them: the start of a unit the messages so far left incomplete,
// and the length it must reach before the unit can be complete. Output a
// Split returns may point into the joined buffer, which stays as it is
// until the next Join. The zero Carry holds nothing; it is used by one
// goroutine.
type Carry struct {
	pending []byte // the start of an incomplete unit
	joined  []byte // pending and the next message
	need    int
}

// Join returns what the next units are split from: data alone, or what was
// carried followed by data. It returns wait (and keeps data) while the
// carried unit still cannot be complete, so a large unit arriving in many
// small messages is copied once per message, not scanned each time.
func (c *Carry) Join(data []byte) (buf []byte, wait bool) {
	if len(c.pending) == 0 {
		return data, false
	}
	if len(c.pending)+len(data) < c.need {
		c.pending = append(c.pending, data...)
		return nil, true
	}
	c.joined = append(append(c.joined[:0], c.pending...), data...)
	c.pending, c.need = c.pending[:0], 0
	return c.joined, false
}

// Keep carries rest, the start of a unit that is complete only once at
// least need bytes of it are there, to the next Join.
func (c *Carry) Keep(rest []byte, need int) {
	c.pending, c.need = append(c.pending, rest...), need
}
