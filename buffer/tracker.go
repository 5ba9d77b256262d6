package buffer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// HeldOverhead is what each held message costs the hold buffer on top of its
// payload: roughly the bookkeeping the tracker keeps per message. Charging
// it makes TETHER_HOLD_MAX_BYTES a bound on memory, not only on payload, so
// a flood of tiny out-of-order messages cannot grow the hold buffer without
// limit.
const HeldOverhead = 64

// maxKeptHeld bounds the capacity a stream keeps for its hold slice once the
// slice is empty, so one long gap does not pin a large array for the rest
// of the session. It is also how many released slots may pile up at the
// front of the slice before the live items are moved down.
const maxKeptHeld = 64

// SeqMessage is one sequenced upstream message, as offered to and
// delivered by a [Tracker]; the Tracker's documentation calls it an item.
type SeqMessage struct {
	// Seq is the message's number (TETHER_SEQ_PATH), or for [Tracker.Resync]
	// the number the stream is reset to (TETHER_RESYNC_SEQ_PATH).
	Seq int64
	// First is the lowest number the item covers, read under ModelRange
	// (TETHER_SEQ_FIRST_PATH) and ModelChain (the previous number at
	// TETHER_SEQ_PREV_PATH, plus one) only: see [Model].
	First int64
	// Message is the payload. The tracker copies Data when it holds the
	// item, so the caller may reuse the offered slice after Offer returns.
	Message
	// Hidden is carried along and never read by the tracker. The session
	// sets it on a message that must update sequencing state but not reach
	// the app (a hiding rule matched, docs/design.md "Sequences and gap
	// filling"); it stays with the item while it is held, so a hidden
	// message released later is still hidden.
	Hidden bool
	// EventID is carried along and never read by the tracker either: the
	// name the message's event carries for an sse:// app (the upstream's
	// own id, or its stream and number), kept with the item while it is
	// held.
	EventID string
}

// Verdict is what [Tracker.Offer] did with an item.
type Verdict int

const (
	// Delivered: the item was the stream's next number (or its first), and
	// was passed to deliver, followed by any held successors it released.
	Delivered Verdict = iota
	// Duplicate: the number was delivered already, or is held already. The
	// item was dropped.
	Duplicate
	// Held: numbers are missing before the item. It is kept until they
	// arrive or the gap is given up ([Tracker.Skip]); OfferResult.Gap
	// says what is missing.
	Held
	// HoldFull: numbers are missing before the item and the hold buffer
	// cannot take it: it is at its cap, or its memory budget refused the
	// item's bytes (OfferResult.Refused, [Tracker.SetMeter]). Nothing
	// changed; the item is still the caller's. The
	// caller treats OfferResult.Gap as a gap that timed out
	// (TETHER_GAP_POLICY): close the app with OfferResult.Gap.Err(), or
	// give it up with Skip and offer the item again (see [Tracker.Offer]).
	HoldFull
)

var verdictNames = [...]string{
	Delivered: "delivered",
	Duplicate: "duplicate",
	Held:      "held",
	HoldFull:  "hold-full",
}

// String returns "delivered", "duplicate", "held" or "hold-full", and
// "Verdict(N)" for a value outside the enum.
func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return "Verdict(" + strconv.Itoa(int(v)) + ")"
	}
	return verdictNames[v]
}

// Gap is a range of missing numbers in a stream, From and To inclusive.
type Gap struct {
	Stream   string
	From, To int64
}

// Err returns the error a session closes the app with under the close gap
// policy: a [*GapError] with the same fields.
func (g Gap) Err() error {
	return &GapError{Stream: g.Stream, From: g.From, To: g.To}
}

// OfferResult is the outcome of [Tracker.Offer].
type OfferResult struct {
	Verdict Verdict
	// Gap is set for Held and HoldFull, with From the stream's next
	// expected number. For Held, To is the item's number minus one: every
	// number missing below the item, which is the range to ask the
	// TETHER_GAPFILL_URL for. For HoldFull, To ends the stream's first gap
	// (before the lowest held number, or before the item when nothing is
	// held): the range the gap policy gives up on.
	Gap Gap
	// Refused is set with HoldFull when the hold buffer was under its cap
	// but the memory budget had no room for the item ([Tracker.SetMeter]).
	Refused bool
	// Released counts the held messages delivered after the item.
	Released int
	// Open reports whether the stream still holds messages after the call,
	// that is whether a gap of this stream is still waiting to be filled.
	Open bool
	// Opened is set with Held when the stream held nothing before: its
	// first gap opened now, and the session starts timing it.
	Opened bool
}

// TrackerStats are cumulative counts since the tracker was created.
type TrackerStats struct {
	Delivered     int64 // items passed to deliver, by any method
	Duplicates    int64 // items Offer dropped as duplicates
	HoldFull      int64 // items Offer refused because the hold buffer was full, Refused included
	Refused       int64 // of those, items the memory budget refused under the cap
	ResyncDropped int64 // held items Resync dropped, being at or below its number
	Stale         int64 // held items dropped once a delivered range covered them
	Skips         int64 // calls to Skip that moved a stream forward
}

// seqStream is the state of one sequence.
type seqStream struct {
	name string
	last int64 // L: the last number delivered, or reset to by Resync
	// held[off:] are the held items, sorted by Seq, all above last+1. Items
	// are released from the front, so off advances instead of copying the
	// slice on every release.
	held []SeqMessage
	off  int
}

func (s *seqStream) holding() bool { return s.off < len(s.held) }

func (s *seqStream) lowest() int64 { return s.held[s.off].Seq }

// find returns the index in held of the item numbered seq, or where it
// belongs, and whether it is there.
func (s *seqStream) find(seq int64) (int, bool) {
	live := s.held[s.off:]
	if len(live) == 0 || live[len(live)-1].Seq < seq {
		// The common case: successors of a gap arrive in order.
		return len(s.held), false
	}
	i := sort.Search(len(live), func(i int) bool { return live[i].Seq >= seq })
	return s.off + i, live[i].Seq == seq
}

// insert puts it at index i of held.
func (s *seqStream) insert(i int, it SeqMessage) {
	if s.off > 0 && len(s.held) == cap(s.held) {
		// Reuse the released prefix instead of growing the array.
		i -= s.off
		s.compact()
	}
	s.held = append(s.held, SeqMessage{})
	copy(s.held[i+1:], s.held[i:])
	s.held[i] = it
}

// compact moves the live items to the front of held.
func (s *seqStream) compact() {
	n := copy(s.held, s.held[s.off:])
	clear(s.held[n:])
	s.held = s.held[:n]
	s.off = 0
}

// pop removes and returns the lowest held item.
func (s *seqStream) pop() SeqMessage {
	it := s.held[s.off]
	// Clear the slot so the payload is not kept reachable once delivered.
	s.held[s.off] = SeqMessage{}
	s.off++
	switch {
	case s.off == len(s.held):
		s.held, s.off = s.held[:0], 0
		if cap(s.held) > maxKeptHeld {
			s.held = nil
		}
	case s.off >= maxKeptHeld && 2*s.off >= len(s.held):
		s.compact()
	}
	return it
}

// Tracker is the per-stream sequence tracker and hold buffer of one session
// (docs/design.md "Sequences and gap filling"). For each stream it remembers the
// last delivered number L; an item numbered s is a duplicate when s <= L, is
// delivered when s = L+1 (then held successors follow it), and is held when
// s > L+1, until the gap L+1 … s-1 is filled, reset by Resync or given up by
// Skip. That is ModelNext; under the other models (NewModelTracker) an item
// follows L as its [Model] says, and the gap ends before its First. Held items are bounded in total, across streams, by the byte limit
// given to [NewTracker] (TETHER_HOLD_MAX_BYTES), each charged its payload
// plus [HeldOverhead].
//
// The tracker keeps no clock, so it stays deterministic: the session times
// gaps (TETHER_GAP_TIMEOUT). One timer per stream fits the results: start
// it when an Offer returns Opened, stop it when a result (or Gap after
// Resync) shows the stream no longer Open; when it fires, apply the policy
// to Gap(stream) (close with its Err, or Skip it), and start it again if
// the stream is still open, so each hole gets a full timeout once it is the
// first. Streams are remembered for the tracker's lifetime, since forgetting
// one would let its duplicates through.
//
// deliver callbacks are called synchronously, in delivery order, and must
// not call the Tracker. An item delivered straight from an Offer or Resync
// argument carries the caller's Data; an item released from the hold buffer
// carries a copy that now belongs to the caller.
//
// A Tracker is not safe for concurrent use; its session serializes access.
type Tracker struct {
	model    Model
	maxBytes int
	bytes    int
	count    int
	stale    int // held items dropped as stale since TakeStale
	streams  map[string]*seqStream
	order    []*seqStream // first-seen order, for ForEachStream
	stats    TrackerStats
	// meter, when set, is the session's account on tether's memory budget
	// (SetMeter): every held byte is reserved on it as well.
	meter Meter
}

// SetMeter counts the held bytes (payload plus HeldOverhead each) on m as
// well, from now on: an item is held only when m also gives its bytes, and
// one m refuses is HoldFull as if the hold buffer were at its cap. It is
// called before the tracker holds anything.
func (t *Tracker) SetMeter(m Meter) { t.meter = m }

// NewTracker returns an empty tracker that holds at most maxHeldBytes. Zero
// holds nothing: every gap is HoldFull at once. It panics when maxHeldBytes
// is negative: configuration validation rejects that first, so reaching here
// with one is a programming error.
func NewTracker(maxHeldBytes int) *Tracker { return NewModelTracker(maxHeldBytes, ModelNext) }

// NewModelTracker is NewTracker for feeds numbered under model: an item
// follows L as [Model] says, rather than at L+1.
func NewModelTracker(maxHeldBytes int, model Model) *Tracker {
	if maxHeldBytes < 0 {
		panic(fmt.Sprintf("buffer: NewTracker limit must be >= 0, got %d", maxHeldBytes))
	}
	return &Tracker{model: model, maxBytes: maxHeldBytes, streams: map[string]*seqStream{}}
}

// Offer sequences one item of stream ("" when there is a single stream).
//
// A stream's first item is delivered whatever its number (docs/design.md). After
// that, with L the last delivered number: Seq <= L is a Duplicate; Seq = L+1
// is Delivered, followed by the held successors it makes consecutive; Seq >
// L+1 is Held, or a Duplicate when that number is held already, or HoldFull
// when the hold buffer cannot take it. An item that fills part of a gap
// without closing it (L+1 < Seq < the lowest held number) is simply held.
//
// On HoldFull the caller applies its gap policy to OfferResult.Gap at
// once, as if the gap had timed out: close the app with
// OfferResult.Gap.Err(); or (skip, notify) give the gap up with
// Skip(OfferResult.Gap, deliver) and offer the item again. Each such
// round moves the stream forward by at least one number, so the loop ends
// with the item Delivered or Held.
//
// Offer does not allocate unless it holds the item or meets a new stream.
func (t *Tracker) Offer(name string, it SeqMessage, deliver func(SeqMessage)) OfferResult {
	s, ok := t.streams[name]
	if !ok {
		t.addStream(name, it.Seq)
		t.deliver(it, deliver)
		return OfferResult{Verdict: Delivered}
	}
	switch {
	case it.Seq <= s.last:
		// Checked first: when last is MaxInt64, last+1 would wrap around.
		t.stats.Duplicates++
		return OfferResult{Verdict: Duplicate, Open: s.holding()}
	case t.follows(s, it):
		s.last = it.Seq
		t.deliver(it, deliver)
		n := t.release(s, deliver)
		return OfferResult{Verdict: Delivered, Released: n, Open: s.holding()}
	}
	return t.hold(s, it)
}

// hold keeps it, numbered above last+1, until the numbers before it arrive.
func (t *Tracker) hold(s *seqStream, it SeqMessage) OfferResult {
	i, found := s.find(it.Seq)
	if found {
		t.stats.Duplicates++
		return OfferResult{Verdict: Duplicate, Open: true}
	}
	cost := len(it.Data) + HeldOverhead
	if cost > t.maxBytes-t.bytes {
		return t.holdFull(s, it, false)
	}
	if t.meter != nil && !t.meter.TryReserve(int64(cost)) {
		return t.holdFull(s, it, true)
	}
	// The caller's slice is only valid during the call (it is usually a
	// read buffer), so a held item gets its own copy.
	it.Data = append([]byte(nil), it.Data...)
	opened := !s.holding()
	s.insert(i, it)
	t.bytes += cost
	t.count++
	return OfferResult{Verdict: Held, Gap: Gap{Stream: s.name, From: s.last + 1, To: t.gapEnd(s, it)}, Open: true, Opened: opened}
}

// holdFull is Offer's answer for an item the hold buffer cannot take;
// refused: the memory budget refused it under the cap.
func (t *Tracker) holdFull(s *seqStream, it SeqMessage, refused bool) OfferResult {
	t.stats.HoldFull++
	if refused {
		t.stats.Refused++
	}
	to := t.gapEnd(s, it)
	if s.holding() {
		to = min(to, t.gapEnd(s, s.held[s.off]))
	}
	return OfferResult{Verdict: HoldFull, Gap: Gap{Stream: s.name, From: s.last + 1, To: to}, Open: s.holding(), Refused: refused}
}

// Resync resets stream to it.Seq because the server chose a snapshot over a
// replay (TETHER_RESYNC_MATCH): the stream's L becomes it.Seq, even when that
// is lower than before; it is delivered; held items numbered at or below
// it.Seq are dropped, and the held successors that are now consecutive are
// delivered after it. An unknown stream starts at it.Seq. Resync returns
// how many held items it dropped.
//
// The resync message is delivered whatever its number: it is never a
// duplicate (docs/design.md).
func (t *Tracker) Resync(name string, it SeqMessage, deliver func(SeqMessage)) (dropped int) {
	s, ok := t.streams[name]
	if !ok {
		s = t.addStream(name, it.Seq)
	}
	s.last = it.Seq
	t.deliver(it, deliver)
	for s.holding() && s.lowest() <= it.Seq {
		t.unaccount(s.pop())
		dropped++
	}
	t.stats.ResyncDropped += int64(dropped)
	t.release(s, deliver)
	return dropped
}

// Gap returns the first gap of stream: the numbers from L+1 to just before
// the lowest held item. ok is false when the stream holds nothing (or is
// unknown): nothing is waiting for a gap to be filled.
func (t *Tracker) Gap(name string) (g Gap, ok bool) {
	s, ok := t.streams[name]
	if !ok || !s.holding() {
		return Gap{}, false
	}
	return Gap{Stream: s.name, From: s.last + 1, To: t.gapEnd(s, s.held[s.off])}, true
}

// Skip gives up on the numbers of g.Stream up to g.To (gap policy skip or
// notify, after TETHER_GAP_TIMEOUT or on HoldFull): held items numbered up
// to g.To are delivered in order (they arrived, only the numbers between
// them are given up), L becomes g.To, and the held successors that are now
// consecutive are delivered. It returns how many items it delivered.
//
// Under the notify policy, send the notice before calling Skip: the items
// Skip delivers come after the gap the notice announces.
//
// Nothing happens when the stream is unknown or g.To <= L (the gap was
// filled meanwhile). g.From is not read: pass the Gap from Gap or
// OfferResult.Gap, so the caller logs and reports the same range it skipped.
func (t *Tracker) Skip(g Gap, deliver func(SeqMessage)) (delivered int) {
	s, ok := t.streams[g.Stream]
	if !ok || g.To <= s.last {
		return 0
	}
	for s.holding() && s.lowest() <= g.To {
		it := s.pop()
		t.unaccount(it)
		s.last = it.Seq
		t.deliver(it, deliver)
		delivered++
	}
	s.last = g.To
	// An item whose own gap ends by g.To now follows: under ModelChain one
	// whose predecessor is not L (a broken chain) is delivered too.
	for s.holding() && t.first(s.held[s.off])-1 <= g.To {
		it := s.pop()
		t.unaccount(it)
		s.last = it.Seq
		t.deliver(it, deliver)
		delivered++
	}
	t.stats.Skips++
	return delivered + t.release(s, deliver)
}

// Last returns the last number delivered in stream (or set by Resync); ok
// is false for a stream not seen yet.
func (t *Tracker) Last(name string) (last int64, ok bool) {
	s, ok := t.streams[name]
	if !ok {
		return 0, false
	}
	return s.last, true
}

// ForEachStream calls fn for every known stream, in the order the streams
// were first seen, with its last delivered number: what the resume message
// (TETHER_RESUME_MESSAGE) is rendered with, once per stream. fn must not
// call the Tracker.
func (t *Tracker) ForEachStream(fn func(name string, last int64)) {
	for _, s := range t.order {
		fn(s.name, s.last)
	}
}

// Streams returns the number of known streams.
func (t *Tracker) Streams() int { return len(t.order) }

// HeldBytes returns what the held items cost against the limit: their
// payload plus HeldOverhead each.
func (t *Tracker) HeldBytes() int { return t.bytes }

// HeldCount returns the number of held items, across streams.
func (t *Tracker) HeldCount() int { return t.count }

// Stats returns the cumulative counts.
func (t *Tracker) Stats() TrackerStats { return t.stats }

func (t *Tracker) addStream(name string, last int64) *seqStream {
	// The name is often a substring of a message the caller reuses: keep
	// a copy, since the stream outlives the message.
	s := &seqStream{name: strings.Clone(name), last: last}
	t.streams[s.name] = s
	t.order = append(t.order, s)
	return s
}

// release delivers the held items of s that follow L without a hole, and
// drops those a delivered range covered (ModelRange).
func (t *Tracker) release(s *seqStream, deliver func(SeqMessage)) (n int) {
	for s.holding() {
		if s.lowest() <= s.last {
			t.unaccount(s.pop())
			t.stats.Stale++
			t.stale++
			continue
		}
		if !t.follows(s, s.held[s.off]) {
			break
		}
		it := s.pop()
		t.unaccount(it)
		s.last = it.Seq
		t.deliver(it, deliver)
		n++
	}
	return n
}

// TakeStale returns how many held items were dropped as stale since the
// last call: items a delivered range covered (ModelRange), which the
// caller counts as duplicates.
func (t *Tracker) TakeStale() int {
	n := t.stale
	t.stale = 0
	return n
}

func (t *Tracker) unaccount(it SeqMessage) {
	cost := len(it.Data) + HeldOverhead
	t.bytes -= cost
	t.count--
	if t.meter != nil {
		t.meter.Release(int64(cost))
	}
}

func (t *Tracker) deliver(it SeqMessage, deliver func(SeqMessage)) {
	t.stats.Delivered++
	deliver(it)
}
