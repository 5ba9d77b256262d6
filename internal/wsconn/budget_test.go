package wsconn_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/wsconn"
)

func newAccount(t *testing.T, limit, share int64) *budget.Account {
	t.Helper()
	b, err := budget.New(budget.Options{Limit: limit, Share: share, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	return b.Open()
}

// awaitHeld polls the account until it holds want bytes: the reader that
// changes it runs on its own goroutine and tells nothing else. Bounded by
// testTimeout.
func awaitHeld(t *testing.T, acct *budget.Account, want int64, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for acct.Held() != want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: the account holds %d bytes, want %d", what, acct.Held(), want)
		}
	}
}

// What the writer never wrote goes back to the budget when the connection
// ends: here the peer's socket takes nothing, so every queued byte is still
// there at the Abort.
func TestQueuedBytesReturnWhenConnectionEnds(t *testing.T) {
	const msgs, size = 20, 1 << 10
	acct := newAccount(t, 1<<20, 4<<10) // the queue goes beyond the share, into the pool
	p := newRawPair(t)
	c := wrap(t, stallWrites(p.server), nil, wsconn.Options{QueueBytes: 64 << 10, Account: acct})
	for i := range msgs {
		mustSend(t, c, ws.OpBinary, numbered(i, size))
	}
	if got := acct.Held(); got != msgs*size {
		t.Fatalf("the account holds %d bytes with %d queued, want %d", got, c.Queued(), msgs*size)
	}
	c.Abort()
	waitDone(t, c, testTimeout)
	if got, used := acct.Held(), acct.Budget().Used(); got != 0 || used != 0 {
		t.Fatalf("after the connection ended: the account holds %d bytes, the budget %d; want 0, 0", got, used)
	}
	if q := c.Queued(); q != 0 {
		t.Fatalf("Queued() = %d after the connection ended, want 0", q)
	}
}

// A write that fails ends the writer the same way: the rest of the queue
// goes back, whatever the writer had already taken of it.
func TestQueuedBytesReturnWhenWriteFails(t *testing.T) {
	const msgs, size = 20, 1 << 10
	acct := newAccount(t, 1<<20, 4<<10)
	p := newRawPair(t)
	stalled := stallWrites(p.server)
	c := wrap(t, stalled, nil, wsconn.Options{QueueBytes: 64 << 10, Account: acct})
	for i := range msgs {
		mustSend(t, c, ws.OpBinary, numbered(i, size))
	}
	_ = stalled.Close() // the writer's pending write fails
	waitDone(t, c, testTimeout)
	if c.Err() == nil {
		t.Fatal("the writer ended without the write's error")
	}
	if got := acct.Budget().Used(); got != 0 {
		t.Fatalf("after a failed write the budget holds %d bytes, want 0", got)
	}
}

// A fragmented message counts on the account from its first fragment read
// until it is whole, even when the budget has no room (reassembly never
// waits); a message cut off by the peer gives its bytes back with the
// error.
func TestReassemblyCounts(t *testing.T) {
	const first, second = 100 << 10, 50 << 10
	acct := newAccount(t, 16<<10, 16<<10) // no pool: the budget is full beyond 16 KiB
	c, peer := clientSide(t, wsconn.Options{Account: acct})
	msgs := readLoop(t, c)

	a, b := pattern(1, first), pattern(2, second)
	writeRaw(t, peer, ws.NewFrame(ws.OpBinary, false, a))
	awaitHeld(t, acct, first, "first fragment read")
	writeRaw(t, peer, ws.NewFrame(ws.OpContinuation, true, b))
	m := recv(t, msgs)
	if m.err != nil || !bytes.Equal(m.p, append(a, b...)) {
		t.Fatalf("got %d bytes, %v; want the %d-byte message", len(m.p), m.err, first+second)
	}
	// Handed over whole: what the caller keeps of it counts where it
	// keeps it.
	if got := acct.Held(); got != 0 {
		t.Fatalf("the account holds %d bytes once the message was returned, want 0", got)
	}

	writeRaw(t, peer, ws.NewFrame(ws.OpText, false, bytes.Repeat([]byte("x"), first)))
	awaitHeld(t, acct, first, "cut message's first fragment read")
	_ = peer.Close()
	if m := recv(t, msgs); m.err == nil {
		t.Fatalf("got a %d-byte message from a peer that closed in the middle of one", len(m.p))
	}
	if got := acct.Budget().Used(); got != 0 {
		t.Fatalf("after the read failed the budget holds %d bytes, want 0", got)
	}
}
