package buffer

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
)

// replayState is what a server that remembers nothing across connections
// ends up with after a sequence of logged messages is replayed to it: the
// keyed subscriptions (key → the subscribe message in force) and, since
// entries without a key are opaque to tether, the exact sequence of those.
type replayState struct {
	keyed  map[string]string
	opaque []string
}

func replay(entries []ReplayEntry) replayState {
	s := replayState{keyed: map[string]string{}}
	for _, e := range entries {
		switch {
		case !e.Keyed:
			s.opaque = append(s.opaque, e.Op.String()+" "+string(e.Message.Data))
		case e.Op == ReplaySubscribe:
			s.keyed[e.Key] = string(e.Message.Data)
		default:
			delete(s.keyed, e.Key)
		}
	}
	return s
}

func (s replayState) equal(o replayState) bool {
	return maps.Equal(s.keyed, o.keyed) && slices.Equal(s.opaque, o.opaque)
}

// replayFuzz decodes the fuzz input and checks the log after every step.
type replayFuzz struct {
	t        *testing.T
	l        *ReplayLog
	maxMsgs  int
	maxBytes int
	full     []ReplayEntry // every entry the log accepted, in order: the uncompacted log
	n        int
}

// step decodes two bytes into one Add: op (bit 0), keyed (bit 1), key
// (bits 2-4, eight keys so they collide often), payload size (second byte,
// 0-31 bytes).
func (r *replayFuzz) step(b0, b1 byte) {
	e := ReplayEntry{Op: ReplayOp(b0 & 1), Keyed: b0&2 != 0}
	if e.Keyed {
		e.Key = strconv.Itoa(int(b0>>2) & 7)
	}
	// The payload names the step, so entries are told apart; it is padded
	// to the decoded size (a shorter size keeps the name whole).
	data := []byte(strconv.Itoa(r.n))
	for len(data) < int(b1&31) {
		data = append(data, '.')
	}
	r.n++
	e.Message = Message{Data: data}
	before := r.l.Entries()
	seq, err := r.l.Add(e)
	r.checkRefusal(e, before, seq, err)
	r.check()
}

// checkRefusal: Add refuses exactly when the compacted result would exceed
// a cap, and a refused Add changes nothing.
func (r *replayFuzz) checkRefusal(e ReplayEntry, before []ReplayEntry, seq uint64, err error) {
	would := slices.DeleteFunc(slices.Clone(before), func(b ReplayEntry) bool { return e.Keyed && b.Keyed && b.Key == e.Key })
	if !(e.Keyed && e.Op == ReplayUnsubscribe) {
		would = append(would, e)
	}
	bytes := 0
	for _, w := range would {
		bytes += len(w.Message.Data)
	}
	wantFull := len(would) > r.maxMsgs || bytes > r.maxBytes
	if wantFull != errors.Is(err, ErrReplayLogFull) || (!wantFull && err != nil) {
		r.t.Fatalf("Add(%+v) = %v, want full=%v (would hold %d messages, %d bytes)", e, err, wantFull, len(would), bytes)
	}
	if wantFull {
		if !entriesEqual(before, r.l.Entries()) {
			r.t.Fatalf("a refused Add changed the log")
		}
		return
	}
	r.full = append(r.full, e)
	if kept := !(e.Keyed && e.Op == ReplayUnsubscribe); kept != (seq != 0) {
		r.t.Fatalf("Add(%+v) returned Seq %d", e, seq)
	}
}

func entriesEqual(a, b []ReplayEntry) bool {
	return slices.EqualFunc(a, b, func(x, y ReplayEntry) bool {
		return x.Seq == y.Seq && string(x.Message.Data) == string(y.Message.Data)
	})
}

// check holds after every step:
//   - the invariant of the issue: replaying the compacted log yields what
//     replaying the full log yields;
//   - the compacted log is a subsequence of the full log (nothing reordered,
//     so "latest action last" holds across keyed and opaque entries);
//   - it holds no keyed unsubscribe, at most one entry per key, each the
//     last keyed action on its key, and every opaque entry;
//   - the caps, Len and Bytes.
func (r *replayFuzz) check() {
	got := r.l.Entries()
	if !replay(got).equal(replay(r.full)) {
		r.t.Fatalf("replaying the log %v differs from replaying everything %v", payloads(got), payloads(r.full))
	}
	r.checkSubsequence(got)
	r.checkKeyed(got)
	bytes := 0
	for _, e := range got {
		bytes += len(e.Message.Data)
	}
	if r.l.Len() != len(got) || r.l.Bytes() != bytes || len(got) > r.maxMsgs || bytes > r.maxBytes {
		r.t.Fatalf("Len %d Bytes %d for %d entries of %d bytes, caps %d/%d",
			r.l.Len(), r.l.Bytes(), len(got), bytes, r.maxMsgs, r.maxBytes)
	}
}

func (r *replayFuzz) checkSubsequence(got []ReplayEntry) {
	i := 0
	for _, e := range got {
		for i < len(r.full) && string(r.full[i].Message.Data) != string(e.Message.Data) {
			i++
		}
		if i == len(r.full) {
			r.t.Fatalf("log %v is not a subsequence of %v", payloads(got), payloads(r.full))
		}
		if g, ok := r.l.Get(e.Seq); !ok || string(g.Message.Data) != string(e.Message.Data) {
			r.t.Fatalf("Get(%d) = %+v, %v", e.Seq, g, ok)
		}
		i++
	}
}

func (r *replayFuzz) checkKeyed(got []ReplayEntry) {
	last := map[string]string{} // key → payload of its last keyed action
	opaque := 0
	for _, e := range r.full {
		if e.Keyed {
			last[e.Key] = string(e.Message.Data)
		} else {
			opaque++
		}
	}
	seen := map[string]bool{}
	for _, e := range got {
		if !e.Keyed {
			opaque--
			continue
		}
		if e.Op == ReplayUnsubscribe || seen[e.Key] || last[e.Key] != string(e.Message.Data) {
			r.t.Fatalf("log %v keeps %s %q of key %s: not the one subscribe in force", payloads(got), e.Op, e.Message.Data, e.Key)
		}
		seen[e.Key] = true
	}
	if opaque != 0 {
		r.t.Fatalf("log %v lost entries without a key", payloads(got))
	}
}

func payloads(es []ReplayEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		k := "-"
		if e.Keyed {
			k = e.Key
		}
		out[i] = e.Op.String() + "/" + k + "/" + string(e.Message.Data)
	}
	return out
}

// FuzzReplayLog drives a log with arbitrary subscribe/unsubscribe sequences
// under arbitrary caps. The seed corpus is in testdata/fuzz/FuzzReplayLog.
func FuzzReplayLog(f *testing.F) {
	f.Add([]byte{0x02, 4, 0x03, 4}, uint8(8), uint16(64))                       // subscribe a, unsubscribe a
	f.Add([]byte{0x02, 4, 0x00, 2, 0x02, 4}, uint8(8), uint16(64))              // a, opaque, a again
	f.Add([]byte{0x06, 10, 0x0a, 10, 0x0e, 10, 0x06, 20}, uint8(3), uint16(35)) // caps
	f.Fuzz(func(t *testing.T, ops []byte, maxMsgs uint8, maxBytes uint16) {
		r := &replayFuzz{t: t, maxMsgs: int(maxMsgs%16) + 1, maxBytes: int(maxBytes%256) + 1}
		r.l = NewReplayLog(r.maxMsgs, r.maxBytes)
		for i := 0; i+1 < len(ops); i += 2 {
			r.step(ops[i], ops[i+1])
		}
	})
}
