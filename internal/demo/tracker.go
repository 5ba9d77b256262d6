package demo

import "slices"

// maxMissingSpans bounds the tracker's memory: past it, the oldest missing
// span is forgotten (its events still count as missed, but a late arrival
// from it would be counted as a duplicate).
const maxMissingSpans = 4096

// span is an inclusive range of sequence numbers.
type span struct{ from, to int64 }

func (s span) len() int64 { return s.to - s.from + 1 }

// seqKind classifies one observed sequence number.
type seqKind int

const (
	seqFirst     seqKind = iota // the first number seen: the stream starts here
	seqNext                     // exactly the successor of the last one
	seqGap                      // beyond the successor: the span before it is missing
	seqDuplicate                // seen before
	seqLate                     // behind the last one, but never seen: out of order
	seqResync                   // a snapshot: the stream goes on from its number
	seqAnnounced                // a gap notice: numbers given up, and said so
)

// observation is what the tracker made of one number.
type observation struct {
	kind seqKind
	gap  span  // the missing numbers, for seqGap
	last int64 // the highest number seen before this one
}

// tracker is the client's sequence accounting: what a careful app would
// compute to notice what a reconnect cost it. It is a plain value, not safe
// for concurrent use.
type tracker struct {
	started bool
	last    int64
	missing []span // sorted, disjoint, all below last

	events, gaps, missed, duplicates, late int64
	snapshots, announced                   int64
}

// observe accounts for one received sequence number.
func (t *tracker) observe(seq int64) observation {
	t.events++
	switch {
	case !t.started:
		t.started, t.last = true, seq
		return observation{kind: seqFirst, last: seq}
	case seq == t.last+1:
		t.last = seq
		return observation{kind: seqNext, last: seq - 1}
	case seq > t.last+1:
		return t.gapTo(seq)
	}
	return t.behind(seq)
}

// gapTo records the numbers between last and seq as missing.
func (t *tracker) gapTo(seq int64) observation {
	g := span{t.last + 1, seq - 1}
	o := observation{kind: seqGap, gap: g, last: t.last}
	t.gaps++
	t.missed += g.len()
	t.missing = append(t.missing, g)
	if len(t.missing) > maxMissingSpans {
		t.missing = slices.Delete(t.missing, 0, 1)
	}
	t.last = seq
	return o
}

// behind classifies a number not above last: late if it was missing, else a
// duplicate.
func (t *tracker) behind(seq int64) observation {
	o := observation{kind: seqDuplicate, last: t.last}
	i, found := slices.BinarySearchFunc(t.missing, seq, func(s span, seq int64) int {
		if s.to < seq {
			return -1
		}
		if s.from > seq {
			return 1
		}
		return 0
	})
	if !found {
		t.events-- // a duplicate is not a new event
		t.duplicates++
		return o
	}
	t.fill(i, seq)
	t.late++
	t.missed--
	o.kind = seqLate
	return o
}

// fill removes seq from missing span i, splitting it when seq is inside.
func (t *tracker) fill(i int, seq int64) {
	s := t.missing[i]
	switch {
	case s.from == s.to:
		t.missing = slices.Delete(t.missing, i, i+1)
	case seq == s.from:
		t.missing[i].from++
	case seq == s.to:
		t.missing[i].to--
	default:
		t.missing[i].to = seq - 1
		t.missing = slices.Insert(t.missing, i+1, span{seq + 1, s.to})
	}
}

// resync restarts the stream at a snapshot's number, as a careful app does:
// the numbers between the last event and at are not missing, the snapshot
// sums them up. gap reports them, when there are any.
func (t *tracker) resync(at int64) observation {
	o := observation{kind: seqResync, last: t.last}
	if t.started && at > t.last {
		o.gap = span{t.last + 1, at}
	}
	t.snapshots++
	t.started, t.last = true, at
	return o
}

// announce accounts for a gap notice: the numbers from to to are lost and
// the app was told, so the event after them is the next one.
func (t *tracker) announce(from, to int64) observation {
	o := observation{kind: seqAnnounced, gap: span{from, to}, last: t.last}
	if t.started && from == t.last+1 && to >= from {
		t.last = to
		t.announced += to - from + 1
	}
	return o
}
