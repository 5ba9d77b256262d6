package buffer

import (
	"errors"
	"slices"
	"testing"

	"github.com/tetherproxy/tether/internal/budget"
)

// metered returns caps of 100 messages and 1000 bytes counting on an
// account whose budget gives it 30 bytes: a share of 20 and a pool of 10,
// which another account can take.
func metered(t *testing.T) (*Budget, *budget.Account, *budget.Account) {
	t.Helper()
	mem, err := budget.New(budget.Options{Limit: 50, Share: 20, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	caps := NewBudget(100, 1000)
	acct := mem.Open()
	caps.SetMeter(acct)
	return caps, acct, mem.Open()
}

// A full memory budget makes the outbox's overflow policy apply as its own
// caps do, and the account holds what the stores hold.
func TestOutboxMemoryBudget(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		caps, acct, _ := metered(t)
		o := NewSharedOutbox(caps, NewPending(caps, OverflowClose), OverflowClose)
		if _, err := o.Push(msg("0123456789012345678901234")); err != nil { // 25 bytes
			t.Fatal(err)
		}
		if _, err := o.Push(msg("0123456789")); !errors.Is(err, ErrOutboxFull) {
			t.Fatalf("Push beyond the memory budget: %v, want ErrOutboxFull", err)
		}
		if acct.Held() != 25 {
			t.Fatalf("account holds %d, want the 25 bytes queued", acct.Held())
		}
		o.Pop()
		if acct.Held() != 0 {
			t.Fatalf("account holds %d after the outbox emptied", acct.Held())
		}
	})
	t.Run("drop-oldest", func(t *testing.T) {
		caps, acct, other := metered(t)
		o := NewSharedOutbox(caps, NewPending(caps, OverflowDropOldest), OverflowDropOldest)
		for _, s := range []string{"aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"} {
			if dropped, err := o.Push(msg(s)); err != nil || dropped != nil {
				t.Fatalf("Push %q: %v, dropped %v", s, err, datas(dropped))
			}
		}
		dropped, err := o.Push(msg("dddddddddd"))
		if err != nil || !slices.Equal(datas(dropped), []string{"aaaaaaaaaa"}) {
			t.Fatalf("Push past the memory budget: %v, dropped %v; want the oldest dropped", err, datas(dropped))
		}
		// Another session takes the pool: evicting everything still
		// leaves no room for more than the share, so the new message
		// goes too.
		o.Pop()
		o.Pop()
		if !other.TryReserve(30) {
			t.Fatal("the other account did not get its share and the pool")
		}
		dropped, err = o.Push(msg("eeeeeeeeeeeeeeeeeeeeeeeee")) // 25 bytes: over the share
		if err != nil || !slices.Equal(datas(dropped), []string{"dddddddddd", "eeeeeeeeeeeeeeeeeeeeeeeee"}) {
			t.Fatalf("Push with no room anywhere: %v, dropped %v; want everything and the message", err, datas(dropped))
		}
		if o.Len() != 0 || acct.Held() != 0 {
			t.Fatalf("Len %d, account %d; want 0, 0", o.Len(), acct.Held())
		}
	})
	t.Run("drop-newest", func(t *testing.T) {
		caps, acct, _ := metered(t)
		o := NewSharedOutbox(caps, NewPending(caps, OverflowDropNewest), OverflowDropNewest)
		o.Push(msg("0123456789012345678901234"))
		dropped, err := o.Push(msg("0123456789"))
		if err != nil || !slices.Equal(datas(dropped), []string{"0123456789"}) {
			t.Fatalf("Push beyond the memory budget: %v, dropped %v", err, datas(dropped))
		}
		if acct.Held() != 25 {
			t.Fatalf("account holds %d, want 25", acct.Held())
		}
	})
}

// Messages moved to pending, put back or acknowledged keep the account
// equal to what the stores hold, caps or no caps.
func TestPendingMemoryBudget(t *testing.T) {
	caps, acct, _ := metered(t)
	p := NewPending(caps, OverflowDropOldest)
	o := NewSharedOutbox(caps, p, OverflowDropOldest)
	o.Push(Message{ID: "a", Data: []byte("aaaaaaaaaa")})
	m, _ := o.Pop()
	p.Move(m, 1)
	o.PushFront(Message{ID: "b", Data: []byte("bbbbbbbbbbbbbbbbbbbbbbbbb")}) // over the budget: admitted once already
	if acct.Held() != 35 {
		t.Fatalf("account holds %d, want 35", acct.Held())
	}
	// The pool is overdrawn: c fits once the oldest pending message is
	// evicted.
	if dropped, err := p.Add(Message{ID: "c", Data: []byte("c")}, 1); err != nil || !slices.Equal(datas(dropped), []string{"aaaaaaaaaa"}) {
		t.Fatalf("Add over a full memory budget: %v, dropped %v; want a", err, datas(dropped))
	}
	if acct.Held() != 26 {
		t.Fatalf("account holds %d, want 26", acct.Held())
	}
	p.Remove("c")
	o.Pop()
	if acct.Held() != 0 {
		t.Fatalf("account holds %d with both stores empty", acct.Held())
	}
}

// A hold buffer under its cap holds an item only when the memory budget
// gives its bytes; a refusal is HoldFull, marked Refused, and the account
// holds what the hold buffer holds until it releases it.
func TestTrackerMemoryBudget(t *testing.T) {
	mem, err := budget.New(budget.Options{Limit: 3 * (HeldOverhead + 10), Share: 2 * (HeldOverhead + 10), Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	acct := mem.Open()
	tr := NewTracker(1 << 20)
	tr.SetMeter(acct)
	var got []int64
	deliver := func(it SeqMessage) { got = append(got, it.Seq) }
	tr.Offer("", SeqMessage{Seq: 1, Message: msg("0123456789")}, deliver)
	for seq := int64(3); seq <= 5; seq++ {
		if res := tr.Offer("", SeqMessage{Seq: seq, Message: msg("0123456789")}, deliver); res.Verdict != Held {
			t.Fatalf("Offer %d: %v, want held", seq, res.Verdict)
		}
	}
	if want := int64(3 * (HeldOverhead + 10)); acct.Held() != want || int64(tr.HeldBytes()) != want {
		t.Fatalf("account %d, hold buffer %d; want %d each", acct.Held(), tr.HeldBytes(), want)
	}
	res := tr.Offer("", SeqMessage{Seq: 6, Message: msg("0123456789")}, deliver)
	if res.Verdict != HoldFull || !res.Refused || res.Gap != (Gap{From: 2, To: 2}) {
		t.Fatalf("Offer beyond the memory budget: %+v, want hold-full, refused, gap 2-2", res)
	}
	if st := tr.Stats(); st.HoldFull != 1 || st.Refused != 1 {
		t.Fatalf("stats %+v, want 1 hold-full, 1 refused", st)
	}
	tr.Skip(res.Gap, deliver)
	if acct.Held() != 0 || !slices.Equal(got, []int64{1, 3, 4, 5}) {
		t.Fatalf("after Skip: account %d, delivered %v; want 0, [1 3 4 5]", acct.Held(), got)
	}
	// Under its cap, the hold buffer's own refusal is not the budget's.
	small := NewTracker(HeldOverhead + 10)
	small.SetMeter(acct)
	small.Offer("", SeqMessage{Seq: 1, Message: msg("x")}, deliver)
	small.Offer("", SeqMessage{Seq: 3, Message: msg("0123456789")}, deliver)
	if res := small.Offer("", SeqMessage{Seq: 4, Message: msg("x")}, deliver); res.Verdict != HoldFull || res.Refused {
		t.Fatalf("Offer beyond TETHER_HOLD_MAX_BYTES: %+v, want hold-full, not refused", res)
	}
}

// The replay log keeps an entry only when the memory budget gives the bytes
// it adds; a refusal is ErrReplayLogFull, as at its caps, and changes
// nothing. Replacements, unsubscribes and a replacement that shrinks keep
// the account equal to the log's bytes.
func TestReplayLogMemoryBudget(t *testing.T) {
	mem, err := budget.New(budget.Options{Limit: 30, Share: 30, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	acct := mem.Open()
	l := NewReplayLog(100, 1000)
	l.SetMeter(acct)
	check := func(what string) {
		t.Helper()
		if acct.Held() != int64(l.Bytes()) {
			t.Fatalf("%s: account holds %d, log %d bytes", what, acct.Held(), l.Bytes())
		}
	}
	mustAdd := func(e ReplayEntry) {
		t.Helper()
		if _, err := l.Add(e); err != nil {
			t.Fatalf("Add %q: %v", e.Message.Data, err)
		}
	}
	mustAdd(sub("a", "aaaaaaaaaa"))
	mustAdd(sub("b", "bbbbbbbbbbbbbbb"))
	check("two entries")
	if _, err := l.Add(sub("c", "cccccccccc")); !errors.Is(err, ErrReplayLogFull) {
		t.Fatalf("Add beyond the memory budget: %v, want ErrReplayLogFull", err)
	}
	if !slices.Equal(logged(l), []string{"aaaaaaaaaa", "bbbbbbbbbbbbbbb"}) {
		t.Fatalf("log %q after a refusal, want it unchanged", logged(l))
	}
	check("a refusal")
	mustAdd(sub("a", "aaaaaaaaaaaaaaa")) // grows by 5: fits exactly
	check("a larger replacement")
	mustAdd(sub("b", "b")) // shrinks
	check("a smaller replacement")
	mustAdd(unsub("a", "u"))
	check("an unsubscribe")
	if acct.Held() != 1 {
		t.Fatalf("account holds %d, want 1", acct.Held())
	}
}
