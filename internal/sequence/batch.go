package sequence

import (
	"time"

	"github.com/tetherproxy/tether/buffer"
)

// batch is what one holder of the delivery turn produced: messages for the
// app, in order, and what to log, count and start once the lock is
// released.
type batch struct {
	out       []buffer.SeqMessage
	events    []event
	fetches   []*fetchJob
	snapshots []*snapshotJob
	closeErr  error // the close policy gave up on a gap: close the app with it
	heldDelta int
	collect   func(buffer.SeqMessage) // appends to out; made once
}

// reset empties the batch for a new turn, keeping its arrays.
func (b *batch) reset() *batch {
	if b.collect == nil {
		b.collect = func(m buffer.SeqMessage) { b.out = append(b.out, m) }
	}
	clear(b.out) // drop references to delivered payloads
	b.out, b.events, b.fetches, b.snapshots = b.out[:0], b.events[:0], b.fetches[:0], b.snapshots[:0]
	b.closeErr, b.heldDelta = nil, 0
	return b
}

func (b *batch) event(e event) { b.events = append(b.events, e) }

// dupReport counts duplicates between the info lines that surface them;
// each one is logged at debug only.
type dupReport struct {
	n     int
	last  time.Time // when the last info line was written
	since time.Time // when the oldest duplicate of n was dropped
}

// dropped counts one duplicate dropped at now, and takes the count when
// duplicates have piled up for a second with no line.
func (d *dupReport) dropped(now time.Time) int {
	if d.n == 0 {
		d.since = now
	}
	d.n++
	if now.Sub(d.since) < dupReportEvery {
		return 0
	}
	return d.due(now)
}

// dupReportEvery spaces the "duplicates dropped" info lines: a resumed
// replay that overlaps what was delivered drops a burst at once, and a
// server that repeats itself steadily must not write a line per message.
const dupReportEvery = time.Second

// due takes the count when a line is due at now.
func (d *dupReport) due(now time.Time) int {
	if d.n == 0 || now.Sub(d.last) < dupReportEvery {
		return 0
	}
	return d.take(now)
}

// take returns the count and starts a new one.
func (d *dupReport) take(now time.Time) int {
	n := d.n
	d.n, d.last = 0, now
	return n
}
