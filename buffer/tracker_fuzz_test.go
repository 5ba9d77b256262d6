package buffer

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// trackerModel is the obviously correct reference: held items in a map per
// stream, sorted when needed, with the rules of DESIGN.md written out.
type trackerModel struct {
	maxBytes int
	bytes    int
	last     map[string]int64
	held     map[string]map[int64]SeqMessage
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
		next := m.last[name] + 1
		if _, ok := m.held[name][next]; !ok || next < m.last[name] {
			return
		}
		m.take(name, next, out)
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
	case it.Seq == last+1:
		m.last[name] = it.Seq
		out = append(out, it)
		m.release(name, &out)
		return OfferResult{Verdict: Delivered, Released: len(out) - 1, Open: len(m.held[name]) > 0}, out
	}
	if _, dup := m.held[name][it.Seq]; dup {
		return OfferResult{Verdict: Duplicate, Open: true}, nil
	}
	if m.bytes+m.cost(it) > m.maxBytes {
		to := it.Seq - 1
		if low, ok := m.lowest(name); ok && low-1 < to {
			to = low - 1
		}
		return OfferResult{Verdict: HoldFull, Gap: Gap{Stream: name, From: last + 1, To: to}, Open: len(m.held[name]) > 0}, nil
	}
	opened := len(m.held[name]) == 0
	m.held[name][it.Seq] = it
	m.bytes += m.cost(it)
	return OfferResult{Verdict: Held, Gap: Gap{Stream: name, From: last + 1, To: it.Seq - 1}, Open: true, Opened: opened}, nil
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
}

var trackerFuzzStreams = [...]string{"", "a", "b"}

// fuzzItem builds an item of size payload bytes (at least 8) whose first
// eight bytes are its id, so it stays identifiable after the tracker copies
// it.
func (f *trackerFuzz) item(seq int64, size int) SeqMessage {
	data := make([]byte, 8+size)
	binary.LittleEndian.PutUint64(data, f.nextID)
	f.nextID++
	return SeqMessage{Seq: seq, Message: Message{Data: data}}
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

func (f *trackerFuzz) offer(name string, seq int64, size int) {
	it := f.item(seq, size)
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
		f.t.Fatalf("item %d became a duplicate in the HoldFull loop", it.Seq)
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
		if ok != holding || (ok && (g.From != f.model.last[name]+1 || g.To != low-1)) {
			f.t.Fatalf("Gap(%q) = %+v, %v; model last %d, lowest held %d", name, g, ok, f.model.last[name], low)
		}
		if last, _ := f.tr.Last(name); last != f.model.last[name] {
			f.t.Fatalf("Last(%q) = %d, model %d", name, last, f.model.last[name])
		}
	}
	if f.tr.HeldCount() != count {
		f.t.Fatalf("HeldCount %d, model %d", f.tr.HeldCount(), count)
	}
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
	var dup, dropped int64
	for _, ft := range f.fates {
		switch ft {
		case tfDuplicate:
			dup++
		case tfDropped:
			dropped++
		}
	}
	if s.Duplicates != dup || s.ResyncDropped != dropped {
		f.t.Fatalf("Stats %+v; counted %d duplicates, %d dropped by resync", s, dup, dropped)
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
		max := int(maxBytes)
		fz := &trackerFuzz{
			t:     t,
			tr:    NewTracker(max),
			model: trackerModel{maxBytes: max, last: map[string]int64{}, held: map[string]map[int64]SeqMessage{}},
			fates: map[uint64]trackerFate{},
			floor: map[string]int64{},
		}
		for i := 0; i+2 < len(ops); i += 3 {
			op, name := ops[i]%8, trackerFuzzStreams[int(ops[i]/8)%len(trackerFuzzStreams)]
			seq := fz.seqFor(name, ops[i+1])
			switch op {
			case 0, 1, 2, 3, 4:
				fz.offer(name, seq, int(ops[i+2]%64))
			case 5:
				fz.resync(name, seq)
			case 6:
				if g, ok := fz.tr.Gap(name); ok {
					fz.skip(g)
				}
			case 7:
				fz.skip(Gap{Stream: name, From: fz.model.last[name] + 1, To: seq})
			}
			fz.check()
		}
		fz.finish()
	})
}
