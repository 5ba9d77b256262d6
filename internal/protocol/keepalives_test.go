package protocol

import (
	"fmt"
	"slices"
	"testing"
)

func strs(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

// The keepalives of the lost connection its upstream did not answer are
// returned once, oldest first; answers of another connection, and
// keepalives of an earlier one, do not count; at most maxUnanswered are kept.
func TestStateUnansweredKeepalives(t *testing.T) {
	st := onceState()
	st.KeepaliveSent(1, []byte("old"))
	st.KeepaliveSent(2, []byte("a"))
	st.KeepaliveSent(2, []byte("b"))
	st.KeepaliveSent(2, []byte("c"))
	st.Upstream(1, Upstream{KeepaliveReply: true}) // a late answer on the old connection
	st.Upstream(2, Upstream{KeepaliveReply: true})
	if got := st.Unanswered(1); got != nil {
		t.Fatalf("Unanswered(1) = %q, want none: connection 2 came after it", got)
	}
	if got := strs(st.Unanswered(2)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("Unanswered(2) = %q, want [b c]", got)
	}
	if got := st.Unanswered(2); got != nil {
		t.Fatalf("Unanswered(2) again = %q, want none", got)
	}

	var want []string
	for i := range maxUnanswered + 3 {
		st.KeepaliveSent(3, fmt.Appendf(nil, "p%d", i))
		if i >= 3 {
			want = append(want, fmt.Sprintf("p%d", i))
		}
	}
	if got := strs(st.Unanswered(3)); !slices.Equal(got, want) {
		t.Fatalf("Unanswered(3) = %q, want the last %d: %q", got, maxUnanswered, want)
	}
}

// KeepaliveSent keeps its own copy: the session's read buffer is reused.
func TestStateKeepaliveCopied(t *testing.T) {
	st := onceState()
	buf := []byte("ping")
	st.KeepaliveSent(1, buf)
	copy(buf, "XXXX")
	if got := strs(st.Unanswered(1)); !slices.Equal(got, []string{"ping"}) {
		t.Fatalf("Unanswered(1) = %q, want [ping]", got)
	}
}

// Asked: an app keepalive answers the ping of the connection it goes to,
// once per ping; a ping of a lost connection asks nothing of the next.
func TestStateAsked(t *testing.T) {
	st := onceState()
	if st.Asked(1) {
		t.Fatal("Asked(1) before any ping")
	}
	st.Upstream(1, Upstream{Ping: true})
	if !st.Asked(1) {
		t.Fatal("Asked(1) after its ping = false")
	}
	if st.Asked(1) {
		t.Fatal("Asked(1) twice for one ping")
	}
	st.Upstream(1, Upstream{Ping: true}) // lost before the app answered
	if st.Asked(2) {
		t.Fatal("Asked(2) for connection 1's ping")
	}
	st.Upstream(2, Upstream{Ping: true})
	st.Upstream(2, Upstream{Ping: true})
	if !st.Asked(2) || st.Asked(2) {
		t.Fatal("two pings before an answer: want one answer taken, as a Centrifugo server takes one pong for the pings it sent")
	}
	if hide := st.Upstream(3, Upstream{Ping: true}); hide != Shown {
		t.Fatalf("a ping is hidden from the app: %v", hide)
	}
}
