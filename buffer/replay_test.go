package buffer

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

// sub and unsub build log entries; key "" means no key.
func sub(key, data string) ReplayEntry {
	return ReplayEntry{Op: ReplaySubscribe, Key: key, Keyed: key != "", Message: msg(data)}
}

func unsub(key, data string) ReplayEntry {
	return ReplayEntry{Op: ReplayUnsubscribe, Key: key, Keyed: key != "", Message: msg(data)}
}

func logged(l *ReplayLog) []string {
	var out []string
	for _, e := range l.Entries() {
		out = append(out, string(e.Message.Data))
	}
	return out
}

func TestReplayLog(t *testing.T) {
	tests := []struct {
		name        string
		maxMessages int
		maxBytes    int
		add         []ReplayEntry
		full        []int // indexes of add refused with ErrReplayLogFull
		want        []string
	}{
		{
			name: "without a key everything is kept in order",
			add:  []ReplayEntry{sub("", "s a"), unsub("", "u a"), sub("", "s a"), sub("", "s b")},
			want: []string{"s a", "u a", "s a", "s b"},
		},
		{
			name: "an unsubscribe removes its subscribe and is not kept",
			add:  []ReplayEntry{sub("a", "s a"), sub("b", "s b"), unsub("a", "u a")},
			want: []string{"s b"},
		},
		{
			name: "an unsubscribe of nothing is not kept",
			add:  []ReplayEntry{unsub("a", "u a"), sub("b", "s b")},
			want: []string{"s b"},
		},
		{
			name: "a repeated subscribe replaces the earlier one and moves to the end",
			add:  []ReplayEntry{sub("a", "s a 1"), sub("b", "s b"), sub("a", "s a 2")},
			want: []string{"s b", "s a 2"},
		},
		{
			name: "latest action last across entries without a key",
			add:  []ReplayEntry{sub("a", "s a"), unsub("", "unsub all"), sub("a", "s a again")},
			want: []string{"unsub all", "s a again"},
		},
		{
			name: "a keyed unsubscribe leaves entries without a key alone",
			add:  []ReplayEntry{sub("", "s *"), unsub("a", "u a")},
			want: []string{"s *"},
		},
		{
			name: "subscribe, unsubscribe, subscribe",
			add:  []ReplayEntry{sub("a", "s a"), unsub("a", "u a"), sub("a", "s a")},
			want: []string{"s a"},
		},
		{
			name:        "message cap refuses a new subscription",
			maxMessages: 2,
			add:         []ReplayEntry{sub("a", "s a"), sub("b", "s b"), sub("c", "s c"), unsub("a", "u a"), sub("c", "s c")},
			full:        []int{2},
			want:        []string{"s b", "s c"},
		},
		{
			name:        "at the message cap a replacement still fits",
			maxMessages: 2,
			add:         []ReplayEntry{sub("a", "s a"), sub("b", "s b"), sub("a", "s a2")},
			want:        []string{"s b", "s a2"},
		},
		{
			name:     "byte cap counts the replaced entry out",
			maxBytes: 6,
			add:      []ReplayEntry{sub("a", "aaa"), sub("b", "bbb"), sub("a", "aaaa"), sub("a", "a")},
			full:     []int{2},
			want:     []string{"bbb", "a"},
		},
		{
			name:     "a refused replacement keeps the earlier subscribe",
			maxBytes: 4,
			add:      []ReplayEntry{sub("a", "aa"), sub("a", "aaaaa")},
			full:     []int{1},
			want:     []string{"aa"},
		},
		{
			name:     "an oversized message never fits",
			maxBytes: 4,
			add:      []ReplayEntry{sub("", "12345"), sub("", "1234")},
			full:     []int{0},
			want:     []string{"1234"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewReplayLog(cmp(tc.maxMessages, 100), cmp(tc.maxBytes, 1000))
			for i, e := range tc.add {
				_, err := l.Add(e)
				if want := slices.Contains(tc.full, i); want != errors.Is(err, ErrReplayLogFull) || (!want && err != nil) {
					t.Fatalf("Add #%d (%s %q) = %v, want full=%v", i, e.Op, e.Message.Data, err, want)
				}
			}
			if got := logged(l); !slices.Equal(got, tc.want) {
				t.Errorf("entries %q, want %q", got, tc.want)
			}
			checkReplayTotals(t, l)
		})
	}
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func checkReplayTotals(t *testing.T, l *ReplayLog) {
	t.Helper()
	bytes := 0
	entries := l.Entries()
	for _, e := range entries {
		bytes += len(e.Message.Data)
	}
	if l.Len() != len(entries) || l.Bytes() != bytes {
		t.Fatalf("Len %d Bytes %d, entries hold %d messages of %d bytes", l.Len(), l.Bytes(), len(entries), bytes)
	}
}

func TestReplayLogSeqAndAnswered(t *testing.T) {
	l := NewReplayLog(10, 100)
	a, _ := l.Add(ReplayEntry{Op: ReplaySubscribe, Key: "a", Keyed: true, Message: msg("s a"), ReplyID: "1"})
	b, _ := l.Add(sub("b", "s b"))
	if a == 0 || b <= a {
		t.Fatalf("Seq %d then %d, want rising from 1", a, b)
	}
	if seq, _ := l.Add(unsub("b", "u b")); seq != 0 {
		t.Errorf("a keyed unsubscribe got Seq %d, want 0 (not kept)", seq)
	}
	if _, ok := l.Get(b); ok {
		t.Error("Get finds the cancelled subscribe")
	}
	l.SetAnswered(a, true)
	e, ok := l.Get(a)
	if !ok || !e.Answered || e.ReplyID != "1" || e.Seq != a {
		t.Fatalf("Get(%d) = %+v, %v; want the answered subscribe", a, e, ok)
	}
	l.SetAnswered(b, true) // gone: nothing happens
	again, _ := l.Add(sub("a", "s a 2"))
	if e, _ := l.Get(again); e.Answered {
		t.Error("a replacing subscribe inherited Answered; it is a new request")
	}
}

// Subscribing and unsubscribing forever keeps memory bounded by the
// subscription set, not by the history.
func TestReplayLogCompactsHoles(t *testing.T) {
	l := NewReplayLog(10, 1000)
	for i := range 10_000 {
		k := strconv.Itoa(i % 3)
		if _, err := l.Add(sub(k, "s "+k)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, _ = l.Add(unsub(k, "u "+k))
		}
	}
	if len(l.slots) > 4*minRing {
		t.Errorf("%d slots for %d entries: holes are not reclaimed", len(l.slots), l.Len())
	}
	checkReplayTotals(t, l)
}

func TestReplayOpString(t *testing.T) {
	for op, want := range map[ReplayOp]string{ReplaySubscribe: "subscribe", ReplayUnsubscribe: "unsubscribe", 7: "ReplayOp(7)"} {
		if got := op.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", op, got, want)
		}
	}
}

func TestNewReplayLogPanics(t *testing.T) {
	for _, caps := range [][2]int{{0, 1}, {1, 0}, {-1, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewReplayLog(%d, %d) did not panic", caps[0], caps[1])
				}
			}()
			NewReplayLog(caps[0], caps[1])
		}()
	}
}

// BenchmarkReplayLog measures the log's side of a restore: logging n keyed
// subscriptions (with churn) and taking the snapshot a reconnect replays.
func BenchmarkReplayLog(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "channel-" + strconv.Itoa(i)
			}
			data := []byte(`{"t":"sub","channel":"channel-000"}`)
			for b.Loop() {
				l := NewReplayLog(10_000, 8<<20)
				for _, k := range keys {
					_, _ = l.Add(ReplayEntry{Op: ReplaySubscribe, Key: k, Keyed: true, Message: Message{Data: data}})
				}
				if len(l.Entries()) != n {
					b.Fatal("lost entries")
				}
			}
		})
	}
}

// SetMessage rewrites an entry in place, within the byte cap.
func TestReplayLogSetMessage(t *testing.T) {
	l := NewReplayLog(10, 20)
	a, _ := l.Add(sub("a", "s a"))
	b, _ := l.Add(sub("b", "s b"))
	if err := l.SetMessage(a, msg("s a 2")); err != nil {
		t.Fatal(err)
	}
	if got := logged(l); len(got) != 2 || got[0] != "s a 2" || got[1] != "s b" || l.Bytes() != 8 {
		t.Fatalf("after SetMessage: %q, %d bytes", got, l.Bytes())
	}
	if err := l.SetMessage(b, msg("0123456789abcdefg")); !errors.Is(err, ErrReplayLogFull) {
		t.Fatalf("over the byte cap: %v", err)
	}
	if got := logged(l); got[1] != "s b" || l.Bytes() != 8 {
		t.Fatalf("a refused SetMessage changed the log: %q, %d bytes", got, l.Bytes())
	}
	l.Add(unsub("a", "u a"))
	if err := l.SetMessage(a, msg("gone")); err != nil || l.Bytes() != 3 {
		t.Fatalf("SetMessage of a removed entry: %v, %d bytes", err, l.Bytes())
	}
}
