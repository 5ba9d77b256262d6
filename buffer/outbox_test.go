package buffer

import (
	"errors"
	"slices"
	"testing"
)

func msg(s string) Message { return Message{Data: []byte(s)} }

func datas(ms []Message) []string {
	if ms == nil {
		return nil
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Data)
	}
	return out
}

// drain pops everything, checking Len and Bytes stay consistent on the way.
func drain(t *testing.T, o *Outbox) []string {
	t.Helper()
	var out []string
	for o.Len() > 0 {
		before := o.Bytes()
		m, ok := o.Pop()
		if !ok {
			t.Fatalf("Pop with Len %d returned ok=false", o.Len())
		}
		if got := before - o.Bytes(); got != len(m.Data) {
			t.Fatalf("Pop of %d bytes lowered Bytes by %d", len(m.Data), got)
		}
		out = append(out, string(m.Data))
	}
	if o.Bytes() != 0 {
		t.Fatalf("empty outbox has Bytes %d", o.Bytes())
	}
	if _, ok := o.Pop(); ok {
		t.Fatal("Pop on an empty outbox returned ok=true")
	}
	return out
}

type step struct {
	op      string // "push", "pop" (data: want popped), "front" (data: message put back)
	data    string
	dropped []string
	err     error
}

func TestOutbox(t *testing.T) {
	tests := []struct {
		name        string
		maxMessages int
		maxBytes    int
		policy      Overflow
		steps       []step
		want        []string
	}{
		{
			name: "close by count", maxMessages: 2, maxBytes: 100, policy: OverflowClose,
			steps: []step{{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "push", data: "c", err: ErrOutboxFull}},
			want:  []string{"a", "b"},
		},
		{
			name: "close by bytes keeps room for smaller", maxMessages: 10, maxBytes: 5, policy: OverflowClose,
			steps: []step{{op: "push", data: "aaa"}, {op: "push", data: "bbb", err: ErrOutboxFull}, {op: "push", data: "cc"}},
			want:  []string{"aaa", "cc"},
		},
		{
			name: "close oversized message", maxMessages: 10, maxBytes: 3, policy: OverflowClose,
			steps: []step{{op: "push", data: "dddd", err: ErrOutboxFull}, {op: "push", data: "ddd"}},
			want:  []string{"ddd"},
		},
		{
			name: "drop-oldest by count", maxMessages: 2, maxBytes: 100, policy: OverflowDropOldest,
			steps: []step{{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "push", data: "c", dropped: []string{"a"}}},
			want:  []string{"b", "c"},
		},
		{
			name: "drop-oldest by bytes evicts until it fits", maxMessages: 10, maxBytes: 6, policy: OverflowDropOldest,
			steps: []step{
				{op: "push", data: "aa"}, {op: "push", data: "bb"}, {op: "push", data: "cc"},
				{op: "push", data: "dddd", dropped: []string{"aa", "bb"}},
			},
			want: []string{"cc", "dddd"},
		},
		{
			name: "drop-oldest exact fit evicts nothing", maxMessages: 10, maxBytes: 6, policy: OverflowDropOldest,
			steps: []step{{op: "push", data: "aa"}, {op: "push", data: "bbbb"}},
			want:  []string{"aa", "bbbb"},
		},
		{
			name: "drop-oldest oversized drops only the new message", maxMessages: 10, maxBytes: 3, policy: OverflowDropOldest,
			steps: []step{{op: "push", data: "aa"}, {op: "push", data: "dddd", dropped: []string{"dddd"}}},
			want:  []string{"aa"},
		},
		{
			name: "drop-newest by count", maxMessages: 2, maxBytes: 100, policy: OverflowDropNewest,
			steps: []step{{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "push", data: "c", dropped: []string{"c"}}},
			want:  []string{"a", "b"},
		},
		{
			name: "drop-newest by bytes", maxMessages: 10, maxBytes: 4, policy: OverflowDropNewest,
			steps: []step{{op: "push", data: "aaa"}, {op: "push", data: "bb", dropped: []string{"bb"}}, {op: "push", data: "c"}},
			want:  []string{"aaa", "c"},
		},
		{
			name: "drop-newest oversized", maxMessages: 10, maxBytes: 1, policy: OverflowDropNewest,
			steps: []step{{op: "push", data: "bb", dropped: []string{"bb"}}},
			want:  nil,
		},
		{
			name: "empty messages count against the message cap", maxMessages: 2, maxBytes: 1, policy: OverflowClose,
			steps: []step{{op: "push"}, {op: "push"}, {op: "push", err: ErrOutboxFull}},
			want:  []string{"", ""},
		},
		{
			name: "pop is FIFO and frees room", maxMessages: 2, maxBytes: 100, policy: OverflowClose,
			steps: []step{
				{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "pop", data: "a"},
				{op: "push", data: "c"}, {op: "pop", data: "b"},
			},
			want: []string{"c"},
		},
		{
			name: "push front restores order", maxMessages: 3, maxBytes: 100, policy: OverflowClose,
			steps: []step{
				{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "pop", data: "a"},
				{op: "front", data: "a"}, {op: "push", data: "c"},
			},
			want: []string{"a", "b", "c"},
		},
		{
			name: "push front above the caps blocks close", maxMessages: 2, maxBytes: 100, policy: OverflowClose,
			steps: []step{
				{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "pop", data: "a"}, {op: "push", data: "c"},
				{op: "front", data: "a"}, {op: "push", data: "d", err: ErrOutboxFull},
			},
			want: []string{"a", "b", "c"},
		},
		{
			name: "push front above the caps then drop-oldest evicts back under", maxMessages: 2, maxBytes: 100, policy: OverflowDropOldest,
			steps: []step{
				{op: "push", data: "a"}, {op: "push", data: "b"}, {op: "pop", data: "a"}, {op: "push", data: "c"},
				{op: "front", data: "a"}, {op: "push", data: "d", dropped: []string{"a", "b"}},
			},
			want: []string{"c", "d"},
		},
		{
			name: "push front above the byte cap then drop-newest", maxMessages: 10, maxBytes: 4, policy: OverflowDropNewest,
			steps: []step{
				{op: "push", data: "aa"}, {op: "pop", data: "aa"}, {op: "push", data: "bbb"},
				{op: "front", data: "aa"}, {op: "push", data: "", dropped: []string{""}},
			},
			want: []string{"aa", "bbb"},
		},
		{
			name: "push front into an empty outbox", maxMessages: 1, maxBytes: 1, policy: OverflowClose,
			steps: []step{{op: "front", data: "zzz"}},
			want:  []string{"zzz"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(tt.maxMessages, tt.maxBytes, tt.policy)
			for i, s := range tt.steps {
				runStep(t, o, i, s)
			}
			wantBytes := 0
			for _, w := range tt.want {
				wantBytes += len(w)
			}
			if o.Len() != len(tt.want) || o.Bytes() != wantBytes {
				t.Errorf("Len, Bytes = %d, %d; want %d, %d", o.Len(), o.Bytes(), len(tt.want), wantBytes)
			}
			if got := drain(t, o); !slices.Equal(got, tt.want) {
				t.Errorf("contents %q, want %q", got, tt.want)
			}
		})
	}
}

func runStep(t *testing.T, o *Outbox, i int, s step) {
	t.Helper()
	switch s.op {
	case "push":
		dropped, err := o.Push(msg(s.data))
		if !errors.Is(err, s.err) {
			t.Fatalf("step %d: Push(%q) error %v, want %v", i, s.data, err, s.err)
		}
		if got := datas(dropped); !slices.Equal(got, s.dropped) {
			t.Fatalf("step %d: Push(%q) dropped %q, want %q", i, s.data, got, s.dropped)
		}
		if len(s.dropped) == 0 && dropped != nil {
			t.Fatalf("step %d: Push(%q) returned non-nil empty dropped", i, s.data)
		}
	case "pop":
		m, ok := o.Pop()
		if !ok || string(m.Data) != s.data {
			t.Fatalf("step %d: Pop = %q, %v; want %q, true", i, m.Data, ok, s.data)
		}
	case "front":
		o.PushFront(msg(s.data))
	default:
		t.Fatalf("step %d: unknown op %q", i, s.op)
	}
}

func TestOutboxKeepsBinaryFlag(t *testing.T) {
	o := NewOutbox(4, 100, OverflowClose)
	for _, m := range []Message{{Binary: true, Data: []byte{0, 1}}, {Data: []byte("t")}} {
		if _, err := o.Push(m); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := o.Pop()
	o.PushFront(m)
	for _, want := range []bool{true, false} {
		if m, _ := o.Pop(); m.Binary != want {
			t.Errorf("Binary = %v, want %v", m.Binary, want)
		}
	}
}

func TestOutboxCloseKeepsNothing(t *testing.T) {
	o := NewOutbox(1, 100, OverflowClose)
	if _, err := o.Push(msg("a")); err != nil {
		t.Fatal(err)
	}
	dropped, err := o.Push(msg("b"))
	if !errors.Is(err, ErrOutboxFull) || dropped != nil {
		t.Fatalf("Push = %q, %v; want nil, ErrOutboxFull", datas(dropped), err)
	}
	if o.Len() != 1 || o.Bytes() != 1 {
		t.Fatalf("refused message changed Len, Bytes to %d, %d", o.Len(), o.Bytes())
	}
	if got := ErrOutboxFull.Error(); got != "outbox full" {
		t.Errorf("ErrOutboxFull text %q, want the close reason %q", got, "outbox full")
	}
}

// TestOutboxReleasesMemory checks the two ways an outbox could pin payloads
// or capacity after a backlog drains: popped slots must be cleared, the ring
// must shrink back, and the previous Push's dropped list must be cleared.
func TestOutboxReleasesMemory(t *testing.T) {
	o := NewOutbox(1000, 1<<20, OverflowDropOldest)
	for range 1000 {
		if _, err := o.Push(msg("payload")); err != nil {
			t.Fatal(err)
		}
	}
	peak := len(o.ring)
	if peak < 1000 {
		t.Fatalf("ring of %d slots holds 1000 messages", peak)
	}
	for o.Len() > 1 {
		o.Pop()
	}
	if len(o.ring) != minRing {
		t.Errorf("ring has %d slots after draining to 1 message, want %d (peak %d)", len(o.ring), minRing, peak)
	}
	for i, m := range o.ring {
		if m.Data != nil && i != o.head {
			t.Errorf("slot %d still references a popped payload", i)
		}
	}

	full := NewOutbox(1, 100, OverflowDropOldest)
	_, _ = full.Push(msg("old"))
	dropped, _ := full.Push(msg("new"))
	if len(dropped) != 1 {
		t.Fatalf("dropped %q, want one message", datas(dropped))
	}
	backing := dropped[:1]
	full.Pop()
	if d, _ := full.Push(msg("next")); d != nil {
		t.Fatalf("Push into an empty outbox dropped %q", datas(d))
	}
	if backing[0].Data != nil {
		t.Error("dropped list still references a payload after the next Push")
	}
}

func TestOutboxWrapsAround(t *testing.T) {
	o := NewOutbox(minRing, 1<<10, OverflowClose)
	next, want := 0, 0
	push := func() {
		if _, err := o.Push(msg(string(rune('a' + next%26)))); err != nil {
			t.Fatal(err)
		}
		next++
	}
	for range minRing - 1 {
		push()
	}
	// Cycle through the ring many times with the head at every offset, and
	// grow it while wrapped to exercise both branches of resize.
	for round := range 5 * minRing {
		m, _ := o.Pop()
		if got := string(m.Data); got != string(rune('a'+want%26)) {
			t.Fatalf("round %d: popped %q, want %q", round, got, string(rune('a'+want%26)))
		}
		want++
		push()
	}
	o.budget.maxMessages = 4 * minRing
	for range 3 * minRing {
		push()
	}
	for o.Len() > 0 {
		m, _ := o.Pop()
		if got := string(m.Data); got != string(rune('a'+want%26)) {
			t.Fatalf("after growth: popped %q, want %q", got, string(rune('a'+want%26)))
		}
		want++
	}
	if want != next {
		t.Fatalf("popped %d messages, pushed %d", want, next)
	}
}

func TestNewOutboxPanics(t *testing.T) {
	tests := []struct {
		name                  string
		maxMessages, maxBytes int
		policy                Overflow
	}{
		{"zero messages", 0, 1, OverflowClose},
		{"negative bytes", 1, -1, OverflowClose},
		{"unknown policy", 1, 1, Overflow(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("NewOutbox did not panic")
				}
			}()
			NewOutbox(tt.maxMessages, tt.maxBytes, tt.policy)
		})
	}
}

func TestOverflowText(t *testing.T) {
	for _, o := range []Overflow{OverflowClose, OverflowDropOldest, OverflowDropNewest} {
		var got Overflow = -1
		if err := got.UnmarshalText([]byte(o.String())); err != nil || got != o {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", o.String(), got, err, o)
		}
	}
	names := map[Overflow]string{
		OverflowClose: "close", OverflowDropOldest: "drop-oldest", OverflowDropNewest: "drop-newest",
		Overflow(7): "Overflow(7)", Overflow(-1): "Overflow(-1)",
	}
	for o, want := range names {
		if got := o.String(); got != want {
			t.Errorf("Overflow(%d).String() = %q, want %q", int(o), got, want)
		}
	}
	for _, bad := range []string{"", "Close", " close", "drop_oldest", "drop"} {
		o := OverflowDropNewest
		err := o.UnmarshalText([]byte(bad))
		want := `invalid overflow policy "` + bad + `": want close, drop-oldest or drop-newest`
		if err == nil || err.Error() != want {
			t.Errorf("UnmarshalText(%q) error %v, want %q", bad, err, want)
		}
		if o != OverflowDropNewest {
			t.Errorf("failed UnmarshalText(%q) changed the value to %v", bad, o)
		}
	}
}

func BenchmarkOutboxPushPop(b *testing.B) {
	o := NewOutbox(10000, 8<<20, OverflowClose)
	m := msg(`{"op":"subscribe","channel":"trades"}`)
	for range 100 {
		_, _ = o.Push(m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := o.Push(m); err != nil {
			b.Fatal(err)
		}
		o.Pop()
	}
}

func BenchmarkOutboxDropOldest(b *testing.B) {
	o := NewOutbox(100, 8<<20, OverflowDropOldest)
	m := msg(`{"op":"subscribe","channel":"trades"}`)
	for range 101 {
		_, _ = o.Push(m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if dropped, _ := o.Push(m); len(dropped) != 1 {
			b.Fatalf("dropped %d messages, want 1", len(dropped))
		}
	}
}

func BenchmarkOutboxPopPushFront(b *testing.B) {
	o := NewOutbox(10000, 8<<20, OverflowClose)
	m := msg(`{"op":"subscribe","channel":"trades"}`)
	for range 100 {
		_, _ = o.Push(m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		head, _ := o.Pop()
		o.PushFront(head)
	}
}
