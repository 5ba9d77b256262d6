package buffer

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// trackerModel is the obviously correct reference: held items in a map per
// stream, sorted when needed, with the rules of docs/design.md and of each
// sequence model (docs/sequences.md) written out.
type trackerModel struct {
	model    Model
	maxBytes int
	bytes    int
	stale    int64
	last     map[string]int64
	held     map[string]map[int64]SeqMessage
}

// first is the lowest number an item covers: First under range (the first
// update id) and chain (the previous id plus one), Seq otherwise.
func (m *trackerModel) first(it SeqMessage) int64 {
	if m.model == ModelRange || m.model == ModelChain {
		return it.First
	}
	return it.Seq
}

// follows is each model's definition of in order, for an item above L:
// next L+1; range first <= L+1 <= last; chain prev == L (or the item is
// L+1, when nothing can be missing); increasing any.
func (m *trackerModel) follows(name string, it SeqMessage) bool {
	last := m.last[name]
	switch m.model {
	case ModelRange:
		return it.First <= last+1
	case ModelChain:
		return it.First-1 == last || it.Seq-1 == last
	case ModelIncreasing:
		return true
	}
	return it.Seq == last+1
}

// gapTo is the last number missing before a held item: the one before its
// first, at least L+1 (a chain whose predecessor is below L) and below the
// item.
func (m *trackerModel) gapTo(name string, it SeqMessage) int64 {
	return min(max(m.first(it)-1, m.last[name]+1), it.Seq-1)
}

func (m *trackerModel) cost(it SeqMessage) int { return len(it.Data) + HeldOverhead }

func (m *trackerModel) lowest(name string) (int64, bool) {
	if len(m.held[name]) == 0 {
		return 0, false
	}
	return slices.Min(heldSeqs(m.held[name])), true
}

func heldSeqs(h map[int64]SeqMessage) []int64 {
	keys := make([]int64, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

func (m *trackerModel) take(name string, seq int64, out *[]SeqMessage) {
	it := m.held[name][seq]
	delete(m.held[name], seq)
	m.bytes -= m.cost(it)
	m.last[name] = seq
	*out = append(*out, it)
}

func (m *trackerModel) release(name string, out *[]SeqMessage) {
	for {
		low, ok := m.lowest(name)
		if !ok {
			return
		}
		it := m.held[name][low]
		switch {
		case low <= m.last[name]: // covered by a delivered range: stale
			delete(m.held[name], low)
			m.bytes -= m.cost(it)
			m.stale++
		case m.follows(name, it):
			m.take(name, low, out)
		default:
			return
		}
	}
}

func (m *trackerModel) offer(name string, it SeqMessage) (OfferResult, []SeqMessage) {
	var out []SeqMessage
	last, known := m.last[name]
	switch {
	case !known:
		m.last[name] = it.Seq
		m.held[name] = map[int64]SeqMessage{}
		return OfferResult{Verdict: Delivered}, []SeqMessage{it}
	case it.Seq <= last:
		return OfferResult{Verdict: Duplicate, Open: len(m.held[name]) > 0}, nil
	case m.follows(name, it):
		m.last[name] = it.Seq
		out = append(out, it)
		m.release(name, &out)
		return OfferResult{Verdict: Delivered, Released: len(out) - 1, Open: len(m.held[name]) > 0}, out
	}
	if _, dup := m.held[name][it.Seq]; dup {
		return OfferResult{Verdict: Duplicate, Open: true}, nil
	}
	if m.bytes+m.cost(it) > m.maxBytes {
		to := m.gapTo(name, it)
		if low, ok := m.lowest(name); ok {
			to = min(to, m.gapTo(name, m.held[name][low]))
		}
		return OfferResult{Verdict: HoldFull, Gap: Gap{Stream: name, From: last + 1, To: to}, Open: len(m.held[name]) > 0}, nil
	}
	opened := len(m.held[name]) == 0
	m.held[name][it.Seq] = it
	m.bytes += m.cost(it)
	return OfferResult{Verdict: Held, Gap: Gap{Stream: name, From: last + 1, To: m.gapTo(name, it)}, Open: true, Opened: opened}, nil
}

func (m *trackerModel) resync(name string, it SeqMessage) (int, []SeqMessage) {
	if _, known := m.last[name]; !known {
		m.held[name] = map[int64]SeqMessage{}
	}
	m.last[name] = it.Seq
	dropped := 0
	for seq, h := range m.held[name] {
		if seq <= it.Seq {
			delete(m.held[name], seq)
			m.bytes -= m.cost(h)
			dropped++
		}
	}
	out := []SeqMessage{it}
	m.release(name, &out)
	return dropped, out
}

func (m *trackerModel) skip(g Gap) []SeqMessage {
	last, known := m.last[g.Stream]
	if !known || g.To <= last {
		return nil
	}
	var out []SeqMessage
	keys := heldSeqs(m.held[g.Stream])
	slices.Sort(keys)
	for _, seq := range keys {
		if seq <= g.To {
			m.take(g.Stream, seq, &out)
		}
	}
	m.last[g.Stream] = g.To
	// What waited only for numbers up to g.To follows now, whatever the
	// model says of its predecessor: that gap was given up.
	for {
		low, ok := m.lowest(g.Stream)
		if !ok || m.first(m.held[g.Stream][low])-1 > g.To {
			break
		}
		m.take(g.Stream, low, &out)
	}
	m.release(g.Stream, &out)
	return out
}

// trackerFate is what became of an offered item.
type trackerFate int

const (
	tfNone trackerFate = iota
	tfDelivered
	tfDuplicate
	tfRefused // HoldFull: still the caller's
	tfDropped // by Resync
	tfHeld    // still held at the end
	tfStale   // dropped once a delivered range covered it
)

type trackerFuzz struct {
	t      *testing.T
	tr     *Tracker
	model  trackerModel
	nextID uint64
	fates  map[uint64]trackerFate
	// floor is, per stream, the number every delivered item must exceed:
	// the last delivered or resynced number.
	floor map[string]int64
	// held are the ids the model held at the last check: one gone since
	// without a fate was dropped as stale.
	held      map[uint64]bool
	takeStale int64 // what TakeStale returned, in sum
}

var trackerFuzzStreams = [...]string{"", "a", "b"}

// fuzzItem builds an item of size payload bytes (at least 8) whose first
// eight bytes are its id, so it stays identifiable after the tracker copies
// it.
func (f *trackerFuzz) item(seq int64, size int) SeqMessage {
	data := make([]byte, 8+size)
	binary.LittleEndian.PutUint64(data, f.nextID)
	f.nextID++
	return SeqMessage{Seq: seq, First: seq, Message: Message{Data: data}}
}

func seqMessageID(it SeqMessage) uint64 { return binary.LittleEndian.Uint64(it.Data) }

// seqFor picks a number near the stream's last one or (high bit set) its
// highest held one, or at an end of int64.
func (f *trackerFuzz) seqFor(name string, b byte) int64 {
	switch b {
	case 0xff:
		return math.MaxInt64
	case 0xfe:
		return math.MinInt64
	case 0xfd:
		return math.MaxInt64 - 1
	}
	base := f.model.last[name]
	if b&0x80 != 0 {
		// Relative to the highest held number, so long held runs with
		// holes build up.
		for seq := range f.model.held[name] {
			base = max(base, seq)
		}
	}
	return base + int64(b%16) - 3
}

func (f *trackerFuzz) setFate(id uint64, to trackerFate) {
	if f.fates[id] != tfNone {
		f.t.Fatalf("item %d given a second trackerFate %d after %d: delivered or dropped twice", id, to, f.fates[id])
	}
	f.fates[id] = to
}

// delivered checks one stream's deliveries against the model's and the
// ordering invariants, and records their trackerFate.
func (f *trackerFuzz) delivered(name string, got, want []SeqMessage, resyncFirst bool) {
	ids := func(items []SeqMessage) []uint64 {
		out := make([]uint64, len(items))
		for i, it := range items {
			out[i] = seqMessageID(it)
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		f.t.Fatalf("stream %q delivered %v, model %v", name, ids(got), ids(want))
	}
	for i, it := range got {
		floor, seen := f.floor[name]
		if seen && it.Seq <= floor && !(resyncFirst && i == 0) {
			f.t.Fatalf("stream %q delivered %d after %d: not strictly increasing", name, it.Seq, floor)
		}
		f.floor[name] = it.Seq
		f.setFate(seqMessageID(it), tfDelivered)
	}
}

func (f *trackerFuzz) offer(name string, seq int64, size int) { f.offerItem(name, f.item(seq, size)) }

// offerSpan offers an item covering span numbers below seq too (range), or
// whose predecessor is span+1 below it (chain).
func (f *trackerFuzz) offerSpan(name string, seq, span int64, size int) {
	it := f.item(seq, size)
	if seq > math.MinInt64+span {
		it.First = seq - span
	}
	f.offerItem(name, it)
}

func (f *trackerFuzz) offerItem(name string, it SeqMessage) {
	seq := it.Seq
	var got []SeqMessage
	res := f.tr.Offer(name, it, func(d SeqMessage) { got = append(got, d) })
	want, wantOut := f.model.offer(name, it)
	if res != want {
		f.t.Fatalf("Offer(%q, %d) = %+v, model %+v", name, seq, res, want)
	}
	f.delivered(name, got, wantOut, false)
	switch res.Verdict {
	case Duplicate:
		f.setFate(seqMessageID(it), tfDuplicate)
	case HoldFull:
		f.holdFull(name, it, res)
	}
}

// holdFull runs the skip loop Offer documents, or, for every other item,
// leaves the item refused as the close policy would.
func (f *trackerFuzz) holdFull(name string, it SeqMessage, res OfferResult) {
	if it.Seq%2 == 0 {
		f.setFate(seqMessageID(it), tfRefused)
		return
	}
	for rounds := 0; res.Verdict == HoldFull; rounds++ {
		if rounds > 64 {
			f.t.Fatalf("HoldFull loop for %d did not end", it.Seq)
		}
		f.skip(res.Gap)
		var got []SeqMessage
		res = f.tr.Offer(name, it, func(d SeqMessage) { got = append(got, d) })
		want, wantOut := f.model.offer(name, it)
		if res != want {
			f.t.Fatalf("re-Offer(%q, %d) = %+v, model %+v", name, it.Seq, res, want)
		}
		f.delivered(name, got, wantOut, false)
	}
	if res.Verdict == Duplicate {
		// Under range and chain a held item covering a later number can be
		// released by a skip: this one is then stale, as the model agrees.
		// Under next no other item carries its number.
		if f.model.model == ModelNext {
			f.t.Fatalf("item %d became a duplicate in the HoldFull loop", it.Seq)
		}
		f.setFate(seqMessageID(it), tfDuplicate)
	}
}

func (f *trackerFuzz) skip(g Gap) {
	var got []SeqMessage
	n := f.tr.Skip(g, func(d SeqMessage) { got = append(got, d) })
	want := f.model.skip(g)
	if n != len(got) {
		f.t.Fatalf("Skip returned %d, delivered %d", n, len(got))
	}
	f.delivered(g.Stream, got, want, false)
}

func (f *trackerFuzz) resync(name string, seq int64) {
	it := f.item(seq, 0)
	before := f.heldIDs(name)
	var got []SeqMessage
	dropped := f.tr.Resync(name, it, func(d SeqMessage) { got = append(got, d) })
	wantDropped, wantOut := f.model.resync(name, it)
	if dropped != wantDropped {
		f.t.Fatalf("Resync(%q, %d) dropped %d, model %d", name, seq, dropped, wantDropped)
	}
	f.delivered(name, got, wantOut, true)
	after := f.heldIDs(name)
	for _, id := range before {
		if !slices.Contains(after, id) && f.fates[id] == tfNone {
			f.setFate(id, tfDropped)
		}
	}
}

func (f *trackerFuzz) heldIDs(name string) []uint64 {
	var ids []uint64
	for _, it := range f.model.held[name] {
		ids = append(ids, seqMessageID(it))
	}
	return ids
}

func (f *trackerFuzz) check() {
	if f.tr.HeldBytes() != f.model.bytes {
		f.t.Fatalf("HeldBytes %d, model %d", f.tr.HeldBytes(), f.model.bytes)
	}
	if f.tr.HeldBytes() > f.model.maxBytes || f.tr.HeldBytes() < 0 {
		f.t.Fatalf("HeldBytes %d outside [0, %d]", f.tr.HeldBytes(), f.model.maxBytes)
	}
	count := 0
	for name, h := range f.model.held {
		count += len(h)
		g, ok := f.tr.Gap(name)
		low, holding := f.model.lowest(name)
		if ok != holding || (ok && (g.From != f.model.last[name]+1 || g.To != f.model.gapTo(name, h[low]))) {
			f.t.Fatalf("Gap(%q) = %+v, %v; model last %d, lowest held %d", name, g, ok, f.model.last[name], low)
		}
		if last, _ := f.tr.Last(name); last != f.model.last[name] {
			f.t.Fatalf("Last(%q) = %d, model %d", name, last, f.model.last[name])
		}
	}
	if f.tr.HeldCount() != count {
		f.t.Fatalf("HeldCount %d, model %d", f.tr.HeldCount(), count)
	}
	f.takeStale += int64(f.tr.TakeStale())
	if s := f.tr.Stats(); s.Stale != f.model.stale || f.takeStale != s.Stale {
		f.t.Fatalf("Stats.Stale %d, TakeStale in sum %d, model %d", s.Stale, f.takeStale, f.model.stale)
	}
	now := map[uint64]bool{}
	for _, h := range f.model.held {
		for _, it := range h {
			now[seqMessageID(it)] = true
		}
	}
	for id := range f.held {
		if !now[id] && f.fates[id] == tfNone {
			f.setFate(id, tfStale)
		}
	}
	f.held = now
}

// finish checks every offered item has exactly one trackerFate, counting the ones
// still held.
func (f *trackerFuzz) finish() {
	for _, h := range f.model.held {
		for _, it := range h {
			if f.fates[seqMessageID(it)] != tfNone {
				f.t.Fatalf("held item %d also has trackerFate %d", seqMessageID(it), f.fates[seqMessageID(it)])
			}
			f.fates[seqMessageID(it)] = tfHeld
		}
	}
	for id := range f.nextID {
		if f.fates[id] == tfNone {
			f.t.Fatalf("item %d was neither delivered, a duplicate, refused, dropped nor held", id)
		}
	}
	s := f.tr.Stats()
	var dup, dropped, stale int64
	for _, ft := range f.fates {
		switch ft {
		case tfDuplicate:
			dup++
		case tfDropped:
			dropped++
		case tfStale:
			stale++
		}
	}
	// A resync's release may drop stale items too, which it marks dropped.
	if s.Duplicates != dup || s.ResyncDropped+s.Stale != dropped+stale || s.Stale < stale {
		f.t.Fatalf("Stats %+v; counted %d duplicates, %d dropped by resync, %d stale", s, dup, dropped, stale)
	}
}

// FuzzTracker drives Offer, Resync and Skip against the model. Each step
// takes three bytes: the operation and stream, a number relative to the
// stream's last or highest held one (see seqFor), and a payload size.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 6, 4, 0, 5, 0, 0, 4, 0}, uint16(1024))
	f.Add([]byte{0, 3, 0, 1, 3, 0, 0, 9, 30, 0, 8, 40, 0, 7, 0}, uint16(200))
	f.Add([]byte{0, 3, 0, 0, 8, 0, 0, 12, 0, 3, 5, 0, 4, 6, 0, 0, 5, 0}, uint16(300))
	f.Fuzz(func(t *testing.T, ops []byte, maxBytes uint16) {
		fz := newTrackerFuzz(t, int(maxBytes), ModelNext)
		for i := 0; i+2 < len(ops); i += 3 {
			name, seq := fz.stepTarget(ops[i], ops[i+1])
			size := int(ops[i+2] % 64)
			fz.step(ops[i], name, seq, func() { fz.offer(name, seq, size) })
		}
		fz.finish()
	})
}

// newTrackerFuzz is a fresh tracker under model and its reference.
func newTrackerFuzz(t *testing.T, maxBytes int, model Model) *trackerFuzz {
	return &trackerFuzz{
		t:     t,
		tr:    NewModelTracker(maxBytes, model),
		model: trackerModel{model: model, maxBytes: maxBytes, last: map[string]int64{}, held: map[string]map[int64]SeqMessage{}},
		fates: map[uint64]trackerFate{},
		floor: map[string]int64{},
	}
}

// stepTarget reads a step's first two bytes: the stream (op's upper bits)
// and its number (see seqFor).
func (f *trackerFuzz) stepTarget(op, n byte) (string, int64) {
	name := trackerFuzzStreams[int(op/8)%len(trackerFuzzStreams)]
	return name, f.seqFor(name, n)
}

// step runs one operation of either fuzz target, picked by op's lower
// three bits: an offer (five in eight), a resync, skipping the tracker's
// own gap, or skipping up to seq; then checks the tracker against the
// reference.
func (f *trackerFuzz) step(op byte, name string, seq int64, offer func()) {
	switch op % 8 {
	case 0, 1, 2, 3, 4:
		offer()
	case 5:
		f.resync(name, seq)
	case 6:
		if g, ok := f.tr.Gap(name); ok {
			f.skip(g)
		}
	case 7:
		f.skip(Gap{Stream: name, From: f.model.last[name] + 1, To: seq})
	}
	f.check()
}

// FuzzTrackerModels is FuzzTracker under each sequence model, against the
// reference's definitions. Each step takes four bytes: the operation and
// stream, a number (see seqFor), how many numbers below it the item covers
// (range) or how far below it its predecessor is, minus one (chain), and a
// payload size; model picks the Model.
func FuzzTrackerModels(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 0, 8, 2, 0, 0, 5, 0, 0, 0, 12, 3, 0}, uint16(1024), uint8(ModelRange))
	f.Add([]byte{0, 3, 0, 0, 0, 9, 1, 0, 0, 5, 0, 0, 6, 0, 0, 0, 0, 0x83, 4, 0}, uint16(1024), uint8(ModelChain))
	f.Add([]byte{0, 3, 0, 0, 0, 5, 0, 0, 0, 4, 0, 0, 0, 9, 0, 0}, uint16(300), uint8(ModelIncreasing))
	f.Add([]byte{0, 3, 0, 0, 0, 9, 6, 40, 0, 10, 7, 40, 0, 11, 0, 40, 0, 6, 0, 0}, uint16(200), uint8(ModelRange))
	f.Fuzz(func(t *testing.T, ops []byte, maxBytes uint16, model uint8) {
		fz := newTrackerFuzz(t, int(maxBytes), Model(model%uint8(len(modelNames))))
		for i := 0; i+3 < len(ops); i += 4 {
			name, seq := fz.stepTarget(ops[i], ops[i+1])
			span, size := int64(ops[i+2]%8), int(ops[i+3]%64)
			fz.step(ops[i], name, seq, func() { fz.offerSpan(name, seq, span, size) })
		}
		fz.finish()
	})
}
