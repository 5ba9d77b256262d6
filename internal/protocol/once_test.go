package protocol

import (
	"testing"

	"github.com/tetherproxy/tether/buffer"
)

// onceState is a State as a graphql-ws-like protocol drives it: keyed
// operations, some at most once, and unsubscribes sent only while active.
func onceState() *State {
	budget := buffer.NewBudget(100, 1<<20)
	return NewState(Capabilities{ReadsApp: true, ReadsUpstream: true},
		Limits{MaxMessages: 100, MaxBytes: 1 << 20, Budget: budget, Overflow: buffer.OverflowDropOldest})
}

func op(key string, once bool) App {
	return App{Kind: AppSubscribe, Key: key, Keyed: true, AtMostOnce: once}
}

func remember(t *testing.T, st *State, a App) uint64 {
	t.Helper()
	ref, err := st.Remember(a, buffer.Message{Data: []byte(a.Key)})
	if err != nil {
		t.Fatalf("Remember(%s): %v", a.Key, err)
	}
	return ref
}

func keysOf(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

func replayedKeys(s Snapshot) []string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, e.Key)
	}
	return out
}

// An at-most-once operation sent on a connection that is lost is abandoned,
// in log order, and never replayed; one never sent is replayed once and
// abandoned only after that connection is lost in turn; a subscription is
// replayed every time; what the server ended is neither.
func TestStateAtMostOnce(t *testing.T) {
	st := onceState()
	st.Begin(1)
	st.SentLive(op("sub", false), remember(t, st, op("sub", false)), 1)
	st.SentLive(op("q1", true), remember(t, st, op("q1", true)), 1)
	st.SentLive(op("q2", true), remember(t, st, op("q2", true)), 1)
	st.SentLive(op("done", true), remember(t, st, op("done", true)), 1)
	st.Upstream(1, Upstream{Ends: true, EndKey: "done"})
	if got := keysOf(st.Lost(1)); len(got) != 2 || got[0] != "q1" || got[1] != "q2" {
		t.Fatalf("Lost(1) abandoned %v, want [q1 q2]", got)
	}
	if st.Active("q1") || st.Active("done") || !st.Active("sub") {
		t.Fatalf("active after the loss: q1=%v done=%v sub=%v, want false false true", st.Active("q1"), st.Active("done"), st.Active("sub"))
	}
	// Started while down: not sent yet, so the next restore sends it.
	remember(t, st, op("q3", true))
	if got := keysOf(st.Lost(1)); got != nil {
		t.Fatalf("a second Lost(1) abandoned %v", got)
	}
	if got := replayedKeys(st.Begin(2)); len(got) != 2 || got[0] != "sub" || got[1] != "q3" {
		t.Fatalf("restore of 2 replays %v, want [sub q3]", got)
	}
	if got := keysOf(st.Lost(2)); len(got) != 1 || got[0] != "q3" {
		t.Fatalf("Lost(2) abandoned %v, want [q3]", got)
	}
	if got := replayedKeys(st.Begin(3)); len(got) != 1 || got[0] != "sub" {
		t.Fatalf("restore of 3 replays %v, want [sub]", got)
	}
}

// A queued copy flushed by a restore counts as sent on its connection; one
// the app cancelled before it was sent is not abandoned.
func TestStateAtMostOnceFlushedAndCancelled(t *testing.T) {
	st := onceState()
	ref := remember(t, st, op("q", true))
	remember(t, st, op("gone", true))
	if _, err := st.Remember(App{Kind: AppUnsubscribe, Key: "gone", Keyed: true, IfActive: true}, buffer.Message{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	st.Flushed(buffer.Message{Data: []byte("q"), Ref: ref}, 4)
	if got := keysOf(st.Lost(3)); got != nil {
		t.Fatalf("Lost(3) abandoned %v, sent on 4", got)
	}
	if got := keysOf(st.Lost(4)); len(got) != 1 || got[0] != "q" {
		t.Fatalf("Lost(4) abandoned %v, want [q]", got)
	}
}
