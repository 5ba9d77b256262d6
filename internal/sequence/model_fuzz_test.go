package sequence

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/buffer"
)

// seqRef is the reference for the Sequencer under each model, written from
// the definitions of docs/sequences.md, for one live connection under the
// skip policy: per stream the last delivered number L and the held
// messages; a message follows L by its model's rule; when the gap timeout
// passes, each stream's first gap is given up and what it held back
// follows.
type seqRef struct {
	model   buffer.Model
	streams map[string]*refStream
	dups    int
}

type refItem struct {
	first, seq int64
	text       string
}

type refStream struct {
	known bool
	last  int64
	held  map[int64]refItem
	out   []string
}

func (r *seqRef) stream(name string) *refStream {
	s := r.streams[name]
	if s == nil {
		s = &refStream{held: map[int64]refItem{}}
		r.streams[name] = s
	}
	return s
}

// follows: next L+1; range first <= L+1; chain prev == L, or the item is
// L+1; increasing any number above L. Both reference models share it.
func follows(model buffer.Model, last int64, it refItem) bool {
	switch model {
	case buffer.ModelRange:
		return it.first <= last+1
	case buffer.ModelChain:
		return it.first-1 == last || it.seq-1 == last
	case buffer.ModelIncreasing:
		return true
	}
	return it.seq == last+1
}

// lowestHeld is the held item with the lowest number.
func lowestHeld(held map[int64]refItem) (refItem, bool) {
	if len(held) == 0 {
		return refItem{}, false
	}
	keys := make([]int64, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	return held[slices.Min(keys)], true
}

func (r *seqRef) follows(s *refStream, it refItem) bool { return follows(r.model, s.last, it) }

func (r *seqRef) lowest(s *refStream) (refItem, bool) { return lowestHeld(s.held) }

// take delivers it, a held message or (not held) the one just offered.
func (r *seqRef) take(s *refStream, it refItem) {
	if s.held[it.seq] == it {
		delete(s.held, it.seq)
	}
	s.last = it.seq
	s.out = append(s.out, it.text)
}

// release delivers what follows L, dropping what L already covers.
func (r *seqRef) release(s *refStream) {
	for {
		it, ok := r.lowest(s)
		switch {
		case !ok:
			return
		case it.seq <= s.last:
			delete(s.held, it.seq)
			r.dups++
		case r.follows(s, it):
			r.take(s, it)
		default:
			return
		}
	}
}

func (r *seqRef) offer(name string, it refItem) {
	s := r.stream(name)
	switch {
	case !s.known:
		s.known, s.last = true, it.seq
		s.out = append(s.out, it.text)
	case it.seq <= s.last:
		r.dups++
	case r.follows(s, it):
		r.take(s, it)
		r.release(s)
	default:
		if _, dup := s.held[it.seq]; dup {
			r.dups++
			return
		}
		s.held[it.seq] = it
	}
}

// timeout gives up each stream's first gap: the numbers up to the one
// before the lowest held message's first (at least L+1, and below it).
func (r *seqRef) timeout() {
	for _, s := range r.streams {
		low, ok := r.lowest(s)
		if !ok {
			continue
		}
		to := min(max(low.first-1, s.last+1), low.seq-1)
		s.last = max(s.last, to)
		for {
			it, ok := r.lowest(s)
			if !ok || (it.seq > to && it.first-1 > to) {
				break
			}
			r.take(s, it)
		}
		r.release(s)
	}
}

// FuzzSequencerModels drives a Sequencer under each model against seqRef:
// each step is three bytes, the operation and stream, a number near the
// stream's last (see below) and how many numbers the message covers below
// it (range) or how far below it its predecessor is, minus one (chain);
// model picks the Model.
func FuzzSequencerModels(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 4, 2, 0, 9, 0, 0, 5, 3, 6, 0, 0, 0, 12, 1}, uint8(buffer.ModelRange))
	f.Add([]byte{0, 3, 0, 0, 5, 1, 0, 9, 2, 8, 4, 0, 0, 6, 0, 7, 0, 0, 0, 8, 3}, uint8(buffer.ModelChain))
	f.Add([]byte{0, 3, 0, 0, 5, 0, 0, 4, 0, 0, 9, 0, 6, 0, 0}, uint8(buffer.ModelNext))
	f.Add([]byte{0, 3, 0, 0, 9, 0, 0, 4, 0, 0, 9, 0}, uint8(buffer.ModelIncreasing))
	f.Fuzz(func(t *testing.T, ops []byte, model uint8) {
		m := buffer.Model(model % 4)
		h := newHarness(t, Config{Model: m, Policy: PolicySkip}, false)
		ref := &seqRef{model: m, streams: map[string]*refStream{}}
		names := [...]string{"a", "b"}
		n := 0
		for i := 0; i+2 < len(ops); i += 3 {
			name := names[int(ops[i]/8)%len(names)]
			if ops[i]%8 >= 6 {
				h.clock.Advance(testTimeout)
				ref.timeout()
				continue
			}
			s := ref.stream(name)
			seq := s.last + int64(ops[i+1]%16) - 3
			first := seq - int64(ops[i+2]%8)
			n++
			var text string
			switch m {
			case buffer.ModelRange:
				text = fmt.Sprintf("%s/%d..%d#%d", name, first, seq, n)
			case buffer.ModelChain:
				text = fmt.Sprintf("%s/%d>%d#%d", name, first-1, seq, n)
			default:
				text = fmt.Sprintf("%s/%d#%d", name, seq, n)
			}
			h.burst(1, text)
			if m != buffer.ModelRange && m != buffer.ModelChain {
				first = seq // next and increasing read no first number
			}
			ref.offer(name, refItem{first: first, seq: seq, text: text})
		}
		h.stop()
		got := map[string][]string{}
		for _, g := range h.app.got {
			name, _, _ := strings.Cut(g, "/")
			got[name] = append(got[name], g)
		}
		for name, s := range ref.streams {
			if !slices.Equal(got[name], s.out) {
				t.Fatalf("model %s, stream %s: app got %q, reference %q", m, name, got[name], s.out)
			}
		}
		if dups, _, _, _ := h.metrics.snapshot(); dups != ref.dups {
			t.Fatalf("model %s: %d duplicates counted, reference %d", m, dups, ref.dups)
		}
	})
}
