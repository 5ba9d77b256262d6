package buffer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// trackerScript runs steps against t and returns what was delivered, as
// "stream/seq" ("seq" for the unnamed stream), and each step's outcome.
//
// Steps: "5" offers number 5 on the unnamed stream, "a/5" on stream a;
// "resync a/5" resets a to 5 (the resync item is delivered as "a/5");
// "skip a" gives up a's first gap ("skip" for the unnamed stream).
// Outcomes: the verdict of an offer, "dropped=N" for a resync,
// "skipped=F-T" or "noskip" for a skip.
func trackerScript(t *testing.T, tr *Tracker, steps []string) (delivered, outcomes []string) {
	t.Helper()
	deliver := func(it SeqMessage) {
		delivered = append(delivered, string(it.Data))
	}
	for _, step := range steps {
		verb, arg, found := strings.Cut(step, " ")
		if !found && verb != "skip" {
			verb, arg = "offer", step
		}
		switch verb {
		case "offer":
			name, seq := splitStep(t, arg)
			res := tr.Offer(name, seqMessageFor(name, seq), deliver)
			outcomes = append(outcomes, res.Verdict.String())
		case "resync":
			name, seq := splitStep(t, arg)
			n := tr.Resync(name, seqMessageFor(name, seq), deliver)
			outcomes = append(outcomes, "dropped="+strconv.Itoa(n))
		case "skip":
			name := strings.TrimSpace(arg)
			g, ok := tr.Gap(name)
			if !ok {
				outcomes = append(outcomes, "noskip")
				continue
			}
			tr.Skip(g, deliver)
			outcomes = append(outcomes, fmt.Sprintf("skipped=%d-%d", g.From, g.To))
		default:
			t.Fatalf("bad step %q", step)
		}
	}
	return delivered, outcomes
}

func splitStep(t *testing.T, arg string) (string, int64) {
	t.Helper()
	name, num, found := strings.Cut(arg, "/")
	if !found {
		name, num = "", arg
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		t.Fatalf("bad number in step %q: %v", arg, err)
	}
	return name, seq
}

// seqMessageFor builds an item whose payload names it the way trackerScript
// reports deliveries.
func seqMessageFor(name string, seq int64) SeqMessage {
	label := strconv.FormatInt(seq, 10)
	if name != "" {
		label = name + "/" + label
	}
	return SeqMessage{Seq: seq, Message: Message{Data: []byte(label)}}
}

func TestTrackerSequences(t *testing.T) {
	tests := []struct {
		name      string
		steps     []string
		delivered string
		outcomes  string
	}{
		{
			name:      "in order",
			steps:     []string{"1", "2", "3"},
			delivered: "1 2 3",
			outcomes:  "delivered delivered delivered",
		},
		{
			name:      "first number is delivered whatever it is",
			steps:     []string{"41", "42"},
			delivered: "41 42",
			outcomes:  "delivered delivered",
		},
		{
			name:      "negative and zero numbers are ordinary",
			steps:     []string{"-2", "-1", "0", "1"},
			delivered: "-2 -1 0 1",
			outcomes:  "delivered delivered delivered delivered",
		},
		{
			name:      "duplicates at and below L are dropped",
			steps:     []string{"5", "5", "4", "6", "1"},
			delivered: "5 6",
			outcomes:  "delivered duplicate duplicate delivered duplicate",
		},
		{
			name:      "gap held then released in order when filled",
			steps:     []string{"1", "4", "5", "2", "3", "6"},
			delivered: "1 2 3 4 5 6",
			outcomes:  "delivered held held delivered delivered delivered",
		},
		{
			name:      "successors arriving in reverse are held sorted",
			steps:     []string{"1", "6", "5", "4", "3", "2"},
			delivered: "1 2 3 4 5 6",
			outcomes:  "delivered held held held held delivered",
		},
		{
			name:      "a number inside the gap fills part of it",
			steps:     []string{"1", "9", "5", "2", "3", "4", "6", "7", "8"},
			delivered: "1 2 3 4 5 6 7 8 9",
			outcomes:  "delivered held held delivered delivered delivered delivered delivered delivered",
		},
		{
			name:      "a held number offered again is a duplicate",
			steps:     []string{"1", "3", "3", "2", "3"},
			delivered: "1 2 3",
			outcomes:  "delivered held duplicate delivered duplicate",
		},
		{
			// 2 releases 3 and leaves the hold slice full with a released
			// slot at its front, which 11 reuses; 8 goes in the middle.
			name:      "holes between every held number",
			steps:     []string{"1", "3", "5", "7", "9", "2", "11", "8", "4", "6", "10"},
			delivered: "1 2 3 4 5 6 7 8 9 10 11",
			outcomes:  "delivered held held held held delivered held held delivered delivered delivered",
		},
		{
			name:      "release stops at the next hole",
			steps:     []string{"1", "3", "5", "2", "4"},
			delivered: "1 2 3 4 5",
			outcomes:  "delivered held held delivered delivered",
		},
		{
			name:      "streams are independent",
			steps:     []string{"a/1", "b/10", "a/3", "b/11", "a/2", "b/11", "10"},
			delivered: "a/1 b/10 b/11 a/2 a/3 10",
			outcomes:  "delivered delivered held delivered delivered duplicate delivered",
		},
		{
			name:      "skip gives up the first gap and releases the run after it",
			steps:     []string{"1", "4", "5", "8", "skip", "skip", "9"},
			delivered: "1 4 5 8 9",
			outcomes:  "delivered held held held skipped=2-3 skipped=6-7 delivered",
		},
		{
			name:      "skip without a gap does nothing",
			steps:     []string{"1", "skip", "2"},
			delivered: "1 2",
			outcomes:  "delivered noskip delivered",
		},
		{
			name:      "a late arrival from a skipped gap is a duplicate",
			steps:     []string{"1", "4", "skip", "2"},
			delivered: "1 4",
			outcomes:  "delivered held skipped=2-3 duplicate",
		},
		{
			name:      "resync forward drops held at or below it and releases the rest",
			steps:     []string{"1", "3", "5", "7", "resync 5", "6", "8"},
			delivered: "1 5 6 7 8",
			outcomes:  "delivered held held held dropped=2 delivered delivered",
		},
		{
			name:      "resync backward restarts the numbering",
			steps:     []string{"100", "101", "resync 0", "1", "101"},
			delivered: "100 101 0 1",
			outcomes:  "delivered delivered dropped=0 delivered held",
		},
		{
			name:      "resync of an unknown stream starts it",
			steps:     []string{"resync a/7", "a/7", "a/8"},
			delivered: "a/7 a/8",
			outcomes:  "dropped=0 duplicate delivered",
		},
		{
			name:      "resync that closes the gap releases consecutive successors",
			steps:     []string{"1", "6", "7", "9", "resync 5"},
			delivered: "1 5 6 7",
			outcomes:  "delivered held held held dropped=0",
		},
		{
			name:      "numbers at the ends of int64",
			steps:     []string{fmt.Sprint(int64(math.MaxInt64 - 1)), fmt.Sprint(int64(math.MaxInt64)), fmt.Sprint(int64(math.MinInt64)), fmt.Sprint(int64(math.MaxInt64))},
			delivered: fmt.Sprint(int64(math.MaxInt64-1), " ", int64(math.MaxInt64)),
			outcomes:  "delivered delivered duplicate duplicate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(1 << 20)
			delivered, outcomes := trackerScript(t, tr, tt.steps)
			if got := strings.Join(delivered, " "); got != tt.delivered {
				t.Errorf("delivered %q, want %q", got, tt.delivered)
			}
			if got := strings.Join(outcomes, " "); got != tt.outcomes {
				t.Errorf("outcomes %q, want %q", got, tt.outcomes)
			}
		})
	}
}

func TestTrackerHeldResult(t *testing.T) {
	tr := NewTracker(1 << 20)
	nop := func(SeqMessage) {}
	tr.Offer("s", seqMessageFor("s", 10), nop)
	res := tr.Offer("s", seqMessageFor("s", 14), nop)
	want := OfferResult{Verdict: Held, Gap: Gap{Stream: "s", From: 11, To: 13}, Open: true, Opened: true}
	if res != want {
		t.Fatalf("Offer(14) after 10 = %+v, want %+v", res, want)
	}
	// A later, higher number reports everything missing below it: the
	// range to fetch covers the numbers already held, which come back as
	// duplicates.
	res = tr.Offer("s", seqMessageFor("s", 17), nop)
	if want := (Gap{Stream: "s", From: 11, To: 16}); res.Gap != want || res.Opened {
		t.Fatalf("Offer(17) gap %+v, opened %v; want %+v, not opened again", res.Gap, res.Opened, want)
	}
	if g, ok := tr.Gap("s"); !ok || g != (Gap{Stream: "s", From: 11, To: 13}) {
		t.Fatalf("Gap = %+v, %v; want 11-13", g, ok)
	}
	res = tr.Offer("s", seqMessageFor("s", 11), nop)
	if res.Verdict != Delivered || res.Released != 0 || !res.Open {
		t.Fatalf("Offer(11) = %+v, want delivered, nothing released, still open", res)
	}
	tr.Offer("s", seqMessageFor("s", 12), nop)
	res = tr.Offer("s", seqMessageFor("s", 13), nop)
	if res.Verdict != Delivered || res.Released != 1 || !res.Open {
		t.Fatalf("Offer(13) = %+v, want delivered, 14 released, still open (15-16 missing)", res)
	}
	tr.Offer("s", seqMessageFor("s", 15), nop)
	res = tr.Offer("s", seqMessageFor("s", 16), nop)
	if res.Verdict != Delivered || res.Released != 1 || res.Open {
		t.Fatalf("Offer(16) = %+v, want delivered, 17 released, closed", res)
	}
	if _, ok := tr.Gap("s"); ok {
		t.Fatal("Gap reports a gap after it was filled")
	}
	if tr.HeldBytes() != 0 || tr.HeldCount() != 0 {
		t.Fatalf("HeldBytes, HeldCount = %d, %d after every gap closed", tr.HeldBytes(), tr.HeldCount())
	}
}

func TestTrackerHoldLimit(t *testing.T) {
	const payload = 10
	cost := payload + HeldOverhead
	tr := NewTracker(2 * cost)
	var got []int64
	deliver := func(it SeqMessage) { got = append(got, it.Seq) }
	item := func(seq int64) SeqMessage {
		return SeqMessage{Seq: seq, Message: Message{Data: make([]byte, payload)}}
	}
	tr.Offer("", item(1), deliver)
	tr.Offer("b", item(1), deliver)
	if v := tr.Offer("", item(5), deliver).Verdict; v != Held {
		t.Fatalf("first held item: %v", v)
	}
	if v := tr.Offer("b", item(3), deliver).Verdict; v != Held {
		t.Fatalf("second held item, other stream: %v", v)
	}
	if tr.HeldBytes() != 2*cost {
		t.Fatalf("HeldBytes = %d, want %d", tr.HeldBytes(), 2*cost)
	}

	// The limit is shared: stream "" cannot hold 7 although it holds only
	// one item, and the gap to give up ends below its lowest held number.
	res := tr.Offer("", item(7), deliver)
	want := OfferResult{Verdict: HoldFull, Gap: Gap{Stream: "", From: 2, To: 4}, Open: true}
	if res != want {
		t.Fatalf("Offer over the limit = %+v, want %+v", res, want)
	}
	// A duplicate of a held number is still a duplicate when full.
	if v := tr.Offer("", item(5), deliver).Verdict; v != Duplicate {
		t.Fatalf("held duplicate when full: %v, want duplicate", v)
	}
	// Stream b holds nothing of its own beyond 3; a new gap in a stream
	// that holds nothing reports the gap before the refused item.
	tr.Offer("c", item(1), deliver)
	if res := tr.Offer("c", item(4), deliver); res.Gap != (Gap{Stream: "c", From: 2, To: 3}) || res.Verdict != HoldFull || res.Open {
		t.Fatalf("HoldFull in a stream holding nothing: %+v", res)
	}
	if s := tr.Stats(); s.HoldFull != 2 || s.Duplicates != 1 {
		t.Fatalf("stats %+v, want 2 hold-full and 1 duplicate", s)
	}
}

// TestTrackerHoldFullSkipLoop runs the loop Offer documents for the skip
// and notify policies, and checks it ends with the item delivered, the
// notices covering exactly the numbers given up.
func TestTrackerHoldFullSkipLoop(t *testing.T) {
	tr := NewTracker(2 * HeldOverhead)
	var got []string
	deliver := func(it SeqMessage) { got = append(got, strconv.FormatInt(it.Seq, 10)) }
	empty := func(seq int64) SeqMessage { return SeqMessage{Seq: seq} }
	tr.Offer("", empty(1), deliver)
	tr.Offer("", empty(3), deliver)
	tr.Offer("", empty(6), deliver)

	// SeqMessage 9 costs as much as the whole hold buffer.
	nine := SeqMessage{Seq: 9, Message: Message{Data: make([]byte, HeldOverhead)}}
	res := tr.Offer("", nine, deliver)
	var rounds int
	for res.Verdict == HoldFull {
		if rounds++; rounds > 10 {
			t.Fatal("the HoldFull loop does not end")
		}
		got = append(got, fmt.Sprintf("notice(%d-%d)", res.Gap.From, res.Gap.To))
		tr.Skip(res.Gap, deliver)
		res = tr.Offer("", nine, deliver)
	}
	// Skipping 2 releases 3, but 6 still takes half the room, so 9 is
	// refused again with the next hole, 4-5; skipping that releases 6, and
	// 9 is held behind 7-8, the first gap nobody has given up on.
	want := "1 notice(2-2) 3 notice(4-5) 6"
	if s := strings.Join(got, " "); s != want || res.Verdict != Held {
		t.Fatalf("delivered %q, verdict %v; want %q, held", s, res.Verdict, want)
	}
}

func TestTrackerZeroLimitHoldsNothing(t *testing.T) {
	tr := NewTracker(0)
	nop := func(SeqMessage) {}
	tr.Offer("", SeqMessage{Seq: 1}, nop)
	if v := tr.Offer("", SeqMessage{Seq: 3}, nop).Verdict; v != HoldFull {
		t.Fatalf("gap with a zero limit: %v, want hold-full", v)
	}
	if v := tr.Offer("", SeqMessage{Seq: 2}, nop).Verdict; v != Delivered {
		t.Fatalf("next number with a zero limit: %v, want delivered", v)
	}
}

func TestTrackerOversizedItemIsHoldFullThenDelivered(t *testing.T) {
	tr := NewTracker(100)
	var got []int64
	deliver := func(it SeqMessage) { got = append(got, it.Seq) }
	tr.Offer("", SeqMessage{Seq: 1}, deliver)
	big := SeqMessage{Seq: 5, Message: Message{Data: make([]byte, 100)}}
	res := tr.Offer("", big, deliver)
	if res.Verdict != HoldFull || res.Gap != (Gap{From: 2, To: 4}) {
		t.Fatalf("oversized item: %+v", res)
	}
	tr.Skip(res.Gap, deliver)
	if v := tr.Offer("", big, deliver).Verdict; v != Delivered {
		t.Fatalf("oversized item after its gap was skipped: %v", v)
	}
	if fmt.Sprint(got) != "[1 5]" {
		t.Fatalf("delivered %v, want [1 5]", got)
	}
}

func TestTrackerCopiesHeldData(t *testing.T) {
	tr := NewTracker(1 << 10)
	var got []string
	deliver := func(it SeqMessage) { got = append(got, string(it.Data)) }
	buf := []byte("one")
	tr.Offer("", SeqMessage{Seq: 1, Message: Message{Data: buf}}, deliver)
	copy(buf, "three")
	tr.Offer("", SeqMessage{Seq: 3, Message: Message{Data: buf[:3]}}, deliver)
	copy(buf, "two") // the caller reuses its read buffer
	tr.Offer("", SeqMessage{Seq: 2, Message: Message{Data: buf}}, deliver)
	if s := strings.Join(got, " "); s != "one two thr" {
		t.Fatalf("delivered %q, want %q", s, "one two thr")
	}
}

func TestTrackerCarriesHiddenAndBinary(t *testing.T) {
	tr := NewTracker(1 << 10)
	var got []SeqMessage
	deliver := func(it SeqMessage) { got = append(got, it) }
	tr.Offer("", SeqMessage{Seq: 1}, deliver)
	tr.Offer("", SeqMessage{Seq: 3, Hidden: true, Message: Message{Binary: true, Data: []byte{0xff}}}, deliver)
	tr.Offer("", SeqMessage{Seq: 2}, deliver)
	if len(got) != 3 || !got[2].Hidden || !got[2].Binary || got[2].Seq != 3 || got[1].Hidden {
		t.Fatalf("delivered %+v: the held item lost its flags", got)
	}
}

func TestTrackerSkipBeyondHeld(t *testing.T) {
	tr := NewTracker(1 << 10)
	delivered, _ := trackerScript(t, tr, []string{"1", "3", "6", "9"})
	var more []int64
	n := tr.Skip(Gap{From: 2, To: 7}, func(it SeqMessage) { more = append(more, it.Seq) })
	if n != 2 || fmt.Sprint(more) != "[3 6]" {
		t.Fatalf("Skip to 7 delivered %d: %v, want the held 3 and 6", n, more)
	}
	if last, _ := tr.Last(""); last != 7 {
		t.Fatalf("Last after skipping to 7 = %d", last)
	}
	if g, ok := tr.Gap(""); !ok || g.From != 8 || g.To != 8 {
		t.Fatalf("remaining gap %+v, %v; want 8-8", g, ok)
	}
	if tr.Skip(Gap{To: 5}, func(SeqMessage) { t.Fatal("delivered by a stale skip") }) != 0 {
		t.Fatal("Skip below L did something")
	}
	if tr.Skip(Gap{Stream: "nope", To: 5}, func(SeqMessage) { t.Fatal("delivered for an unknown stream") }) != 0 {
		t.Fatal("Skip of an unknown stream did something")
	}
	_ = delivered
}

func TestTrackerStreamsAndLast(t *testing.T) {
	tr := NewTracker(1 << 10)
	if _, ok := tr.Last("a"); ok {
		t.Fatal("Last of an unknown stream is ok")
	}
	trackerScript(t, tr, []string{"b/5", "a/1", "b/6", "resync c/3", "a/4"})
	var got []string
	tr.ForEachStream(func(name string, last int64) { got = append(got, fmt.Sprintf("%s=%d", name, last)) })
	if s := strings.Join(got, " "); s != "b=6 a=1 c=3" {
		t.Fatalf("ForEachStream: %q, want first-seen order b=6 a=1 c=3", s)
	}
	if tr.Streams() != 3 {
		t.Fatalf("Streams = %d", tr.Streams())
	}
	if last, ok := tr.Last("a"); !ok || last != 1 {
		t.Fatalf("Last(a) = %d, %v; want 1 (4 is held)", last, ok)
	}
}

func TestTrackerStats(t *testing.T) {
	tr := NewTracker(1 << 10)
	trackerScript(t, tr, []string{"1", "1", "3", "5", "resync 3", "skip", "0"})
	want := TrackerStats{Delivered: 3, Duplicates: 2, ResyncDropped: 1, Skips: 1}
	if s := tr.Stats(); s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
}

func TestTrackerReleasesMemory(t *testing.T) {
	tr := NewTracker(1 << 30)
	nop := func(SeqMessage) {}
	tr.Offer("", SeqMessage{Seq: 0}, nop)
	// Even numbers only: every item is behind a hole of its own.
	for seq := int64(2); seq < 2000; seq += 2 {
		tr.Offer("", SeqMessage{Seq: seq, Message: Message{Data: []byte("x")}}, nop)
	}
	// Give up half the holes, so releases run from the front while items
	// remain: the compaction path.
	tr.Skip(Gap{To: 1000}, nop)
	s := tr.streams[""]
	if s.off > maxKeptHeld || len(s.held)-s.off != 499 {
		t.Fatalf("after releasing half: off %d, len %d", s.off, len(s.held))
	}
	tr.Offer("", SeqMessage{Seq: 2001}, nop) // appends after the live part
	tr.Skip(Gap{To: 3000}, nop)
	if s.held != nil || tr.HeldBytes() != 0 || tr.HeldCount() != 0 {
		t.Fatalf("emptied hold keeps cap %d, bytes %d, count %d", cap(s.held), tr.HeldBytes(), tr.HeldCount())
	}
}

func TestGapError(t *testing.T) {
	tests := []struct {
		gap  Gap
		want string
	}{
		{Gap{Stream: "orders", From: 42, To: 45}, "unrecoverable gap in stream orders: missing 42-45"},
		{Gap{From: 7, To: 7}, "unrecoverable gap: missing 7-7"},
	}
	for _, tt := range tests {
		err := tt.gap.Err()
		if err.Error() != tt.want {
			t.Errorf("%+v: %q, want %q", tt.gap, err.Error(), tt.want)
		}
		var ge *GapError
		if !errors.As(fmt.Errorf("session: %w", err), &ge) || ge.Stream != tt.gap.Stream || ge.From != tt.gap.From || ge.To != tt.gap.To {
			t.Errorf("%+v: errors.As gave %+v", tt.gap, ge)
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Delivered: "delivered", Duplicate: "duplicate", Held: "held", HoldFull: "hold-full", Verdict(9): "Verdict(9)", Verdict(-1): "Verdict(-1)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
}

func TestNewTrackerRejectsNegativeLimit(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTracker(-1) did not panic")
		}
	}()
	NewTracker(-1)
}

func TestTrackerOfferDoesNotAllocateInOrder(t *testing.T) {
	tr := NewTracker(1 << 20)
	data := []byte(`{"seq":1}`)
	var n int
	deliver := func(SeqMessage) { n++ }
	seq := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		tr.Offer("orders", SeqMessage{Seq: seq, Message: Message{Data: data}}, deliver)
	})
	if allocs != 0 {
		t.Fatalf("in-order Offer allocates %.1f times per call", allocs)
	}
}

func BenchmarkTrackerInOrder(b *testing.B) {
	tr := NewTracker(8 << 20)
	data := []byte(`{"t":"event","seq":1,"body":"hello"}`)
	var n int
	deliver := func(SeqMessage) { n++ }
	b.ReportAllocs()
	seq := int64(0)
	for b.Loop() {
		seq++
		tr.Offer("", SeqMessage{Seq: seq, Message: Message{Data: data}}, deliver)
	}
}

// BenchmarkTrackerGapRelease holds 63 successors of a one-number gap, then
// fills it: the cost per message of a gap closed by a late arrival.
func BenchmarkTrackerGapRelease(b *testing.B) {
	const run = 64
	tr := NewTracker(8 << 20)
	data := []byte(`{"t":"event","seq":1,"body":"hello"}`)
	var n int
	deliver := func(SeqMessage) { n++ }
	b.ReportAllocs()
	seq := int64(0)
	tr.Offer("", SeqMessage{Seq: seq}, deliver)
	for b.Loop() {
		for i := int64(2); i <= run; i++ {
			tr.Offer("", SeqMessage{Seq: seq + i, Message: Message{Data: data}}, deliver)
		}
		tr.Offer("", SeqMessage{Seq: seq + 1, Message: Message{Data: data}}, deliver)
		seq += run
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*run), "ns/msg")
}
