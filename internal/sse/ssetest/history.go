package ssetest

// history numbers events and keeps the latest max of them, encoded, for
// requests that resume with Last-Event-ID.
type history struct {
	max    int
	last   uint64   // the id of the latest event; 0 before the first
	events [][]byte // encoded events with ids last-len(events)+1 … last
}

// add keeps an encoded event under the next id and returns that id.
func (h *history) add(encode func(id uint64) []byte) uint64 {
	h.last++
	h.events = append(h.events, encode(h.last))
	if len(h.events) > h.max {
		// Copy down rather than reslice, so the array does not grow forever.
		n := copy(h.events, h.events[len(h.events)-h.max:])
		clear(h.events[n:])
		h.events = h.events[:n]
	}
	return h.last
}

// oldest returns the id of the oldest event kept (last+1 when none is).
func (h *history) oldest() uint64 { return h.last - uint64(len(h.events)) + 1 }

// after returns the kept events with ids above id, and the ids the history
// no longer holds between id and them: from > 0 when some were lost.
func (h *history) after(id uint64) (events [][]byte, from, to uint64) {
	if id >= h.last {
		return nil, 0, 0
	}
	start := h.oldest()
	if id+1 < start {
		from, to = id+1, start-1
		id = start - 1
	}
	skip := int(id + 1 - start)
	return h.events[skip:], from, to
}
