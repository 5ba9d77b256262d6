package buffer

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

func idMsg(id string) Message { return Message{ID: id, Data: []byte("m" + id)} }

func ids(ms []Message) []string {
	if ms == nil {
		return nil
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestPendingAckOrderAndResend(t *testing.T) {
	p := NewPending(NewBudget(10, 1000), OverflowClose)
	for _, id := range []string{"1", "2", "3", "4"} {
		if d, err := p.Add(idMsg(id), 1); d != nil || err != nil {
			t.Fatalf("Add(%s) = %v, %v", id, ids(d), err)
		}
	}
	if m, ok := p.Remove("3"); !ok || m.ID != "3" {
		t.Fatalf("Remove(3) = %+v, %v", m, ok)
	}
	if _, ok := p.Remove("3"); ok {
		t.Fatal("a second Remove(3) found it again")
	}
	// Connection 2: everything still pending is re-sent once, in first-send
	// order; a message sent on connection 2 itself is not.
	if _, err := p.Add(idMsg("5"), 2); err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Resend(2)); !slices.Equal(got, []string{"1", "2", "4"}) {
		t.Fatalf("Resend(2) = %v, want [1 2 4]", got)
	}
	if got := p.Resend(2); got != nil {
		t.Fatalf("a second Resend(2) = %v, want nothing", ids(got))
	}
	if got := ids(p.Resend(3)); !slices.Equal(got, []string{"1", "2", "4", "5"}) {
		t.Fatalf("Resend(3) = %v, want [1 2 4 5]", got)
	}
	if p.Len() != 4 || p.Bytes() != 8 {
		t.Fatalf("Len %d Bytes %d, want 4 and 8", p.Len(), p.Bytes())
	}
}

func TestPendingSameIDReplaces(t *testing.T) {
	p := NewPending(NewBudget(10, 1000), OverflowClose)
	_, _ = p.Add(idMsg("a"), 1)
	_, _ = p.Add(idMsg("b"), 1)
	newer := Message{ID: "a", Data: []byte("newer")}
	if d, err := p.Add(newer, 1); d != nil || err != nil {
		t.Fatalf("Add of a known id = %v, %v; a replacement is not a drop", datas(d), err)
	}
	if got := datas(p.Resend(2)); !slices.Equal(got, []string{"mb", "newer"}) {
		t.Fatalf("Resend = %v, want [mb newer]: the latest message, at the end", got)
	}
	if p.Len() != 2 {
		t.Fatalf("Len %d, want 2", p.Len())
	}
}

func TestPendingOverflow(t *testing.T) {
	tests := []struct {
		policy  Overflow
		dropped []string
		err     error
		kept    []string
	}{
		{OverflowClose, nil, ErrOutboxFull, []string{"1", "2"}},
		{OverflowDropNewest, []string{"3"}, nil, []string{"1", "2"}},
		{OverflowDropOldest, []string{"1"}, nil, []string{"2", "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.policy.String(), func(t *testing.T) {
			p := NewPending(NewBudget(2, 1000), tc.policy)
			_, _ = p.Add(idMsg("1"), 1)
			_, _ = p.Add(idMsg("2"), 1)
			d, err := p.Add(idMsg("3"), 1)
			if !errors.Is(err, tc.err) || !slices.Equal(ids(d), tc.dropped) {
				t.Fatalf("Add over the cap = %v, %v; want %v, %v", ids(d), err, tc.dropped, tc.err)
			}
			if p.Has("3") != slices.Contains(tc.kept, "3") {
				t.Errorf("Has(3) = %v with %v kept", p.Has("3"), tc.kept)
			}
			if got := ids(p.Resend(2)); !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %v, want %v", got, tc.kept)
			}
		})
	}
}

// The outbox and the pending store share one budget: pending messages count
// against the outbox caps, and under drop-oldest they go first, being the
// oldest (sent before anything was queued).
func TestSharedBudget(t *testing.T) {
	b := NewBudget(3, 1000)
	p := NewPending(b, OverflowDropOldest)
	o := NewSharedOutbox(b, p, OverflowDropOldest)
	_, _ = p.Add(idMsg("1"), 1)
	_, _ = p.Add(idMsg("2"), 1)
	if d, _ := o.Push(msg("q1")); d != nil {
		t.Fatalf("first queued message dropped %v", datas(d))
	}
	if b.Messages() != 3 || b.Bytes() != 6 {
		t.Fatalf("budget holds %d messages, %d bytes; want 3 and 6", b.Messages(), b.Bytes())
	}
	d, err := o.Push(msg("q2"))
	if err != nil || !slices.Equal(ids(d), []string{"1"}) {
		t.Fatalf("Push over the shared cap = %v, %v; want the oldest pending evicted", ids(d), err)
	}
	d, _ = o.Push(msg("q3"))
	first := ids(d) // d is reused by the next Push
	d, _ = o.Push(msg("q4"))
	if !slices.Equal(first, []string{"2"}) || !slices.Equal(datas(d), []string{"q1"}) {
		t.Fatalf("evicted %v then %v, want pending 2, then queued q1", first, datas(d))
	}
	// Moving a queued message to pending keeps the total.
	m, _ := o.Pop()
	m.ID = "q2"
	p.Move(m, 2)
	if !p.Has("q2") || b.Messages() != 3 || p.Len() != 1 || o.Len() != 2 {
		t.Fatalf("budget %d, pending %d, outbox %d; want 3, 1, 2", b.Messages(), p.Len(), o.Len())
	}
	p.Remove("q2")
	if b.Messages() != 2 || b.Bytes() != 4 {
		t.Fatalf("after the ack the budget holds %d messages, %d bytes; want 2 and 4", b.Messages(), b.Bytes())
	}
	// Under close, a full budget refuses both stores.
	cb := NewBudget(1, 100)
	cp := NewPending(cb, OverflowClose)
	co := NewSharedOutbox(cb, cp, OverflowClose)
	_, _ = cp.Add(idMsg("x"), 1)
	if _, err := co.Push(msg("y")); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("Push with the budget taken by pending = %v, want ErrOutboxFull", err)
	}
}

func TestOutboxDeleteFunc(t *testing.T) {
	b := NewBudget(10, 100)
	o := NewSharedOutbox(b, nil, OverflowClose)
	for i := range 6 {
		_, _ = o.Push(Message{Data: []byte(strconv.Itoa(i)), Ref: uint64(i % 2)})
	}
	if n := o.DeleteFunc(func(m Message) bool { return m.Ref != 0 }); n != 3 {
		t.Fatalf("DeleteFunc removed %d, want 3", n)
	}
	if got := drain(t, o); !slices.Equal(got, []string{"0", "2", "4"}) {
		t.Fatalf("left %v, want [0 2 4] in order", got)
	}
	if b.Messages() != 0 || b.Bytes() != 0 {
		t.Fatalf("budget not released: %d messages, %d bytes", b.Messages(), b.Bytes())
	}
}

// Acks in any order keep memory bounded by what is pending.
func TestPendingCompactsHoles(t *testing.T) {
	p := NewPending(NewBudget(100, 1<<20), OverflowClose)
	for i := range 10_000 {
		_, _ = p.Add(idMsg(strconv.Itoa(i)), 1)
		if i%3 != 0 {
			p.Remove(strconv.Itoa(i)) // acks out of order: every third stays
		}
		if i%3 == 0 && i >= 30 {
			p.Remove(strconv.Itoa(i - 30))
		}
	}
	if len(p.slots)-p.head > 4*p.Len()+2*minRing {
		t.Errorf("%d slots for %d pending messages: holes are not reclaimed", len(p.slots)-p.head, p.Len())
	}
	if p.Len() != len(p.Resend(2)) {
		t.Errorf("Len %d disagrees with Resend", p.Len())
	}
}

func TestRecentIDs(t *testing.T) {
	r := NewRecentIDs(3)
	for _, id := range []string{"a", "b", "a", "c"} {
		r.Add(id)
	}
	if r.Len() != 3 || !r.Contains("a") || !r.Contains("c") {
		t.Fatalf("Len %d; a %v c %v", r.Len(), r.Contains("a"), r.Contains("c"))
	}
	r.Add("d") // forgets the oldest, a
	if r.Contains("a") || !r.Contains("b") || !r.Contains("d") || r.Len() != 3 {
		t.Fatalf("after d: a %v b %v d %v Len %d", r.Contains("a"), r.Contains("b"), r.Contains("d"), r.Len())
	}
	for i := range 100 {
		r.Add(strconv.Itoa(i))
	}
	if r.Len() != 3 || !r.Contains("99") || r.Contains("96") {
		t.Fatalf("window of 3 after 100 adds: Len %d", r.Len())
	}
}

func TestConstructorsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"NewBudget(0, 1)":         func() { NewBudget(0, 1) },
		"NewRecentIDs(0)":         func() { NewRecentIDs(0) },
		"NewPending(bad policy)":  func() { NewPending(NewBudget(1, 1), Overflow(9)) },
		"NewSharedOutbox(policy)": func() { NewSharedOutbox(NewBudget(1, 1), nil, Overflow(-1)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}
