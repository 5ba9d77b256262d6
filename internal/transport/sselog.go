package transport

import "github.com/tetherproxy/tether/internal/budget"

// sseLog holds the events of one sse:// session, encoded, numbered from 1
// and in order: those not yet written to the app (pending) and, behind
// them, those already written, kept so that an app that reconnects can be
// given again what it lost in flight. Written events make room for new
// ones (evict); pending ones never do (the writer would skip them), so once
// the pending events alone fill the limit, the next one does not fit
// (sendq.Fits over pending) and Send waits: the back-pressure on upstream
// reads every app connection applies. Nothing is evicted for an event
// that waits, so the replay window stays whole meanwhile.
//
// The limit bounds all the bytes kept, written or not, so an sse:// session
// costs what any app's write queue costs (TETHER_DOWNSTREAM_BUFFER_BYTES),
// and the replay window is whatever of it the pending events leave. An
// event larger than the limit is taken when nothing is pending, as the
// other write queues take one oversized message, so it cannot block for
// ever.
//
// The written events it keeps count on the session's memory budget
// (keep, TETHER_MEMORY_LIMIT), as the pending ones do through the queue:
// when the budget cannot give them, the oldest are evicted, as the limit
// evicts them, so a full budget shortens the replay window and never
// pauses anything.
//
// It has no lock, no goroutine and no I/O: SSEApp guards it.
type sseLog struct {
	entries []sseEntry // kept, oldest first, numbered first, first+1, ...
	first   uint64     // n of entries[0]; next when empty
	next    uint64     // n of the next event added
	cursor  uint64     // n of the next event to write to the app
	bytes   int64      // kept
	pending int64      // bytes of the entries numbered cursor and above
	limit   int64
	counted int64 // written bytes kept (bytes - pending) counted on the account by keep
}

// sseEntry is one encoded event, immutable once added: a writer may use b
// without the lock while the entry is pending.
type sseEntry struct {
	n  uint64
	b  []byte
	id string // the upstream's id, "" for tether's own
}

func newSSELog(limit int64) sseLog {
	return sseLog{first: 1, next: 1, cursor: 1, limit: limit}
}

// evict drops written entries, oldest first, until size more bytes fit in
// the limit or none is left. For an event that fits (sendq.Fits over
// pending), the bytes kept then stay within the limit.
func (l *sseLog) evict(size int64) {
	for l.bytes+size > l.limit && len(l.entries) > 0 && l.entries[0].n < l.cursor {
		l.bytes -= int64(len(l.entries[0].b))
		l.entries[0] = sseEntry{} // release the bytes now, not at the next reallocation
		l.entries = l.entries[1:]
		l.first++
	}
}

// keep counts the written events kept on acct (nil: none): it gives back
// what evictions and a resume took out of them, and takes what writes
// added, evicting the oldest written events while acct refuses. Call it
// after each change, once the queue has counted the pending bytes it
// released.
func (l *sseLog) keep(acct *budget.Account) {
	if acct == nil {
		return
	}
	for {
		written := l.bytes - l.pending
		switch d := written - l.counted; {
		case d <= 0:
			acct.Release(-d)
			l.counted = written
			return
		case acct.TryReserve(d):
			l.counted = written
			return
		}
		// d > 0, so the oldest entry is a written one.
		l.bytes -= int64(len(l.entries[0].b))
		l.entries[0] = sseEntry{}
		l.entries = l.entries[1:]
		l.first++
	}
}

// add appends an encoded event numbered l.next, with the upstream's id
// ("" for tether's); call evict first.
func (l *sseLog) add(b []byte, id string) {
	l.entries = append(l.entries, sseEntry{n: l.next, b: b, id: id})
	l.next++
	l.bytes += int64(len(b))
	l.pending += int64(len(b))
}

// take appends to dst the pending entries from the cursor on, up to max
// bytes but at least one, and returns them with the number after the last
// one taken. It does not move the cursor: they stay pending (and kept)
// until wrote says they were written.
func (l *sseLog) take(dst [][]byte, max int64) ([][]byte, uint64) {
	n, size := l.cursor, int64(0)
	for i := l.index(n); i < len(l.entries); i++ {
		b := l.entries[i].b
		if len(dst) > 0 && size+int64(len(b)) > max {
			break
		}
		dst = append(dst, b)
		size += int64(len(b))
		n++
	}
	return dst, n
}

// wrote moves the cursor to upTo: the entries before it were written.
func (l *sseLog) wrote(upTo uint64) {
	for i := l.index(l.cursor); l.cursor < upTo && i < len(l.entries); i++ {
		l.pending -= int64(len(l.entries[i].b))
		l.cursor++
	}
}

// resume moves the cursor to the event after the app's last one, after,
// so they are written again: the entries the app lost in flight become
// pending. An after the log no longer reaches back to (its successors were
// evicted) starts at the oldest kept event, and lost counts the events
// skipped; an after not yet reached (impossible for an honest app) starts
// at the next event, skipping nothing.
func (l *sseLog) resume(after uint64) (lost uint64) {
	from := after + 1
	switch {
	case from < l.first:
		lost, from = l.first-from, l.first
	case from > l.next:
		from = l.next
	}
	l.cursor, l.pending = from, 0
	for i := l.index(from); i < len(l.entries); i++ {
		l.pending += int64(len(l.entries[i].b))
	}
	return lost
}

// findID returns the number of the latest kept event with the upstream's
// id.
func (l *sseLog) findID(id string) (uint64, bool) {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if l.entries[i].id == id {
			return l.entries[i].n, true
		}
	}
	return 0, false
}

// index is the position in entries of event n (len(entries) for l.next).
// n must not be below l.first.
func (l *sseLog) index(n uint64) int { return int(n - l.first) }
