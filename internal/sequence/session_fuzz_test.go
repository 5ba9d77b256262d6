package sequence

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// sessionRef is the reference for a Sequencer across upstream connections,
// under any policy and hold buffer size, written from the definitions of
// docs/design.md and docs/sequences.md, for a feed that nothing can fill a
// gap of across a reconnect (no resume, no catch-up, no snapshot). Per
// stream: the last delivered number L, the held messages, the connection
// its last numbered message came from and its epoch. On top of seqRef's
// rules:
//   - a message that cannot be held (the held bytes, each message's length
//     plus buffer.HeldOverhead, would pass the cap) gives the gap before
//     it up under the policy, then is offered again;
//   - a stream's first message on a new connection that would be held
//     gives its gap up at once (nothing can fill it);
//   - on a new connection, a number below L (scope stream) or any number
//     (scope connection) starts the stream over, after its gaps are given
//     up: counted as a restart (stream scope) and given to the policy;
//     likewise a new epoch, on any connection;
//   - close stops everything: the app is closed and gets nothing more;
//     notify sends the notice before what follows the gap.
type sessionRef struct {
	model    buffer.Model
	policy   Policy
	scope    Scope
	maxBytes int
	bytes    int
	streams  map[string]*refSession
	out      map[string][]string
	dups     int
	gaps     map[string]int
	closed   bool
}

type refSession struct {
	known bool
	last  int64
	held  map[int64]refItem
	gen   uint64
	epoch string
}

func newSessionRef(model buffer.Model, policy Policy, scope Scope, maxBytes int) *sessionRef {
	return &sessionRef{model: model, policy: policy, scope: scope, maxBytes: maxBytes,
		streams: map[string]*refSession{}, out: map[string][]string{}, gaps: map[string]int{}}
}

func (r *sessionRef) stream(name string) *refSession {
	s := r.streams[name]
	if s == nil {
		s = &refSession{held: map[int64]refItem{}}
		r.streams[name] = s
	}
	return s
}

func (r *sessionRef) follows(s *refSession, it refItem) bool { return follows(r.model, s.last, it) }

func (r *sessionRef) lowest(s *refSession) (refItem, bool) { return lowestHeld(s.held) }

func (r *sessionRef) deliver(name, text string) { r.out[name] = append(r.out[name], text) }

// take delivers held item it.
func (r *sessionRef) take(name string, s *refSession, it refItem) {
	delete(s.held, it.seq)
	r.bytes -= len(it.text) + buffer.HeldOverhead
	s.last = it.seq
	r.deliver(name, it.text)
}

func (r *sessionRef) release(name string, s *refSession) {
	for {
		it, ok := r.lowest(s)
		switch {
		case !ok:
			return
		case it.seq <= s.last:
			delete(s.held, it.seq)
			r.bytes -= len(it.text) + buffer.HeldOverhead
			r.dups++
		case r.follows(s, it):
			r.take(name, s, it)
		default:
			return
		}
	}
}

// gapEnd is the last number missing before held (or offered) item it.
func (r *sessionRef) gapEnd(s *refSession, it refItem) int64 {
	return min(max(it.first-1, s.last+1), it.seq-1)
}

// firstGap is the end of the stream's first gap, if it holds anything.
func (r *sessionRef) firstGap(s *refSession) (int64, bool) {
	low, ok := r.lowest(s)
	if !ok {
		return 0, false
	}
	return r.gapEnd(s, low), true
}

// giveUp applies the policy to the gap L+1..to of name; false: closed.
func (r *sessionRef) giveUp(name string, s *refSession, to int64) bool {
	switch r.policy {
	case PolicyClose:
		r.gaps[labels.GapClosed]++
		r.closed = true
		return false
	case PolicyNotify:
		r.gaps[labels.GapNotified]++
		r.deliver(name, fmt.Sprintf("%s/!%d-%d", name, s.last+1, to))
	default:
		r.gaps[labels.GapSkipped]++
	}
	r.skip(name, s, to)
	return true
}

// skip is Tracker.Skip: the numbers up to to are given up.
func (r *sessionRef) skip(name string, s *refSession, to int64) {
	if to <= s.last {
		return
	}
	for it, ok := r.lowest(s); ok && it.seq <= to; it, ok = r.lowest(s) {
		r.take(name, s, it)
	}
	s.last = to
	for it, ok := r.lowest(s); ok && it.first-1 <= to; it, ok = r.lowest(s) {
		r.take(name, s, it)
	}
	r.release(name, s)
}

// giveUpStream gives every gap of the stream up; false: closed.
func (r *sessionRef) giveUpStream(name string, s *refSession) bool {
	for to, ok := r.firstGap(s); ok; to, ok = r.firstGap(s) {
		if !r.giveUp(name, s, to) {
			return false
		}
	}
	return true
}

// reset starts the stream over at it (a restart or a new epoch: outcome).
func (r *sessionRef) reset(name string, s *refSession, it refItem, outcome string) {
	if !r.giveUpStream(name, s) {
		return
	}
	r.gaps[outcome]++
	switch r.policy {
	case PolicyClose:
		r.closed = true
		return
	case PolicyNotify:
		r.deliver(name, fmt.Sprintf("%s/!%d-%d%s", name, s.last+1, it.seq-1, outcome))
	}
	s.last = it.seq
	r.deliver(name, it.text)
}

// restart starts the stream over on a new connection under scope
// connection: the feed's contract, not a loss.
func (r *sessionRef) restart(name string, s *refSession, it refItem) {
	if !r.giveUpStream(name, s) {
		return
	}
	s.last = it.seq
	r.deliver(name, it.text)
}

// offer is one numbered message of connection gen, of epoch epoch ("" for
// none).
func (r *sessionRef) offer(name string, gen uint64, epoch string, it refItem) {
	if r.closed {
		return
	}
	s := r.stream(name)
	fresh := s.known && s.gen != gen
	s.gen = gen
	newEpoch := epoch != "" && s.epoch != epoch && s.known && s.epoch != ""
	if epoch != "" {
		s.epoch = epoch
	}
	switch {
	case newEpoch:
		r.reset(name, s, it, labels.GapEpoch)
	case fresh && r.scope == ScopeConnection:
		r.restart(name, s, it)
	case fresh && it.seq < s.last:
		r.reset(name, s, it, labels.GapRestart)
	default:
		r.offerTracked(name, s, it, fresh)
	}
}

func (r *sessionRef) offerTracked(name string, s *refSession, it refItem, fresh bool) {
	for {
		switch {
		case !s.known:
			s.known, s.last = true, it.seq
			r.deliver(name, it.text)
			return
		case it.seq <= s.last:
			r.dups++
			return
		case r.follows(s, it):
			s.last = it.seq
			r.deliver(name, it.text)
			r.release(name, s)
			return
		}
		if _, dup := s.held[it.seq]; dup {
			r.dups++
			return
		}
		cost := len(it.text) + buffer.HeldOverhead
		if cost <= r.maxBytes-r.bytes {
			s.held[it.seq] = it
			r.bytes += cost
			if fresh {
				r.giveUp(name, s, r.gapEnd(s, it))
			}
			return
		}
		// Hold full: the gap before it, or before the lowest held one.
		to := r.gapEnd(s, it)
		if low, ok := r.lowest(s); ok {
			to = min(to, r.gapEnd(s, low))
		}
		if !r.giveUp(name, s, to) {
			return
		}
	}
}

// timeout gives up each stream's first gap.
func (r *sessionRef) timeout() {
	for name, s := range r.streams {
		if r.closed {
			return
		}
		if to, ok := r.firstGap(s); ok {
			r.giveUp(name, s, to)
		}
	}
}

// FuzzSequencerSessions drives a Sequencer across upstream connections
// against sessionRef: under each model, policy and scope, with a hold
// buffer from tiny to the default, new connections and new epochs. Each
// step is three bytes: the operation and stream, a number near the
// stream's last (15: 1, a counter that started over) and how many numbers
// the message covers below it (range) or how far below it its predecessor
// is, minus one (chain).
func FuzzSequencerSessions(f *testing.F) {
	// op%8: 0-4 a message, 5 the gap timeout passes, 6 a new connection, 7
	// a new epoch of the stream (with epochs on).
	f.Add([]byte{0, 3, 0, 0, 4, 0, 6, 0, 0, 0, 9, 0, 0, 4, 0, 5, 0, 0}, uint8(buffer.ModelNext), uint8(PolicyNotify), uint8(0), uint8(0))
	f.Add([]byte{0, 3, 0, 0, 5, 2, 6, 0, 0, 0, 15, 0, 0, 4, 0}, uint8(buffer.ModelRange), uint8(PolicySkip), uint8(0), uint8(0))
	f.Add([]byte{0, 3, 0, 0, 9, 0, 0, 8, 0, 0, 7, 0, 0, 6, 0, 0, 4, 0}, uint8(buffer.ModelNext), uint8(PolicySkip), uint8(2), uint8(0))
	f.Add([]byte{0, 3, 0, 0, 9, 3, 8, 3, 0, 6, 0, 0, 8, 9, 2, 0, 4, 0}, uint8(buffer.ModelChain), uint8(PolicyNotify), uint8(1), uint8(1))
	f.Add([]byte{0, 3, 0, 0, 4, 0, 7, 0, 0, 0, 5, 0, 0, 6, 0}, uint8(buffer.ModelNext), uint8(PolicyClose), uint8(0), uint8(2))
	f.Add([]byte{0, 3, 0, 0, 9, 0, 5, 0, 0, 0, 4, 0}, uint8(buffer.ModelIncreasing), uint8(PolicyClose), uint8(3), uint8(3))
	f.Fuzz(func(t *testing.T, ops []byte, model, policy, hold, flags uint8) {
		m, p := buffer.Model(model%4), Policy(policy%3)
		scope := ScopeStream
		if flags&1 != 0 {
			scope = ScopeConnection
		}
		epochs := flags&2 != 0
		maxBytes := DefaultHoldMaxBytes
		if hold != 0 {
			maxBytes = buffer.HeldOverhead + 4*int(hold)
		}
		cfg := Config{Model: m, Policy: p, Scope: scope, HoldMaxBytes: maxBytes}
		if p == PolicyNotify {
			cfg.Notice = mustNotice(t, "{{.Stream}}/!{{.From}}-{{.To}}{{.Reset}}")
		}
		h := newHarness(t, cfg, false)
		ref := newSessionRef(m, p, scope, maxBytes)
		names := [...]string{"a", "b"}
		epoch := map[string]int{}
		gen := uint64(1)
		n := 0
		for i := 0; i+2 < len(ops); i += 3 {
			name := names[int(ops[i]/8)%len(names)]
			switch ops[i] % 8 {
			case 5:
				h.clock.Advance(testTimeout)
				ref.timeout()
				continue
			case 6:
				h.s.Lost(gen)
				gen++
				continue
			case 7:
				epoch[name]++
				continue
			}
			s := ref.stream(name)
			seq := s.last + int64(ops[i+1]%16) - 3
			if ops[i+1]%16 == 15 {
				seq = 1
			}
			first := seq - int64(ops[i+2]%8)
			n++
			var num string
			switch m {
			case buffer.ModelRange:
				num = fmt.Sprintf("%d..%d", first, seq)
			case buffer.ModelChain:
				num = fmt.Sprintf("%d>%d", first-1, seq)
			default:
				num = fmt.Sprint(seq)
				first = seq // next and increasing read no first number
			}
			e := ""
			if epochs {
				e = fmt.Sprintf("e%d", epoch[name])
				num += "@" + e
			}
			text := fmt.Sprintf("%s/%s#%d", name, num, n)
			h.burst(gen, text)
			ref.offer(name, gen, e, refItem{first: first, seq: seq, text: text})
		}
		h.stop()
		checkSession(t, h, ref, fmt.Sprintf("model %s, policy %s, scope %s, hold %d", m, p, scope, maxBytes))
	})
}

// checkSession compares what the app got, the close and the counts with
// the reference.
func checkSession(t *testing.T, h *harness, ref *sessionRef, what string) {
	t.Helper()
	got := map[string][]string{}
	for _, g := range h.app.got {
		name, _, _ := strings.Cut(g, "/")
		got[name] = append(got[name], g)
	}
	for name := range ref.streams {
		if !slices.Equal(got[name], ref.out[name]) {
			t.Fatalf("%s, stream %s: app got %q, reference %q", what, name, got[name], ref.out[name])
		}
	}
	if closed := h.app.closeCode == CloseUnrecoverable; closed != ref.closed {
		t.Fatalf("%s: app closed %v (code %d), reference %v", what, closed, h.app.closeCode, ref.closed)
	}
	dups, gaps, _, held := h.metrics.snapshot()
	if dups != ref.dups {
		t.Fatalf("%s: %d duplicates counted, reference %d", what, dups, ref.dups)
	}
	delete(gaps, labels.GapFilled) // not modelled
	if !mapsEqual(gaps, maps(ref.gaps)) {
		t.Fatalf("%s: gaps counted %v, reference %v", what, gaps, ref.gaps)
	}
	if held != 0 {
		t.Fatalf("%s: %d held bytes left on the gauge after Stop", what, held)
	}
}
