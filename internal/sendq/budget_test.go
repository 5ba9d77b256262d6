package sendq

import (
	"context"
	"errors"
	"testing"

	"github.com/tetherproxy/tether/internal/budget"
)

func newBudget(t *testing.T, limit, share int64, sessions int) *budget.Budget {
	t.Helper()
	b, err := budget.New(budget.Options{Limit: limit, Share: share, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newBudgetOwner is newOwner whose queue counts on acct.
func newBudgetOwner(limit int64, acct *budget.Account) *owner {
	o := &owner{blocked: make(chan struct{}, 16)}
	o.q.Init(&o.mu, Options{Limit: limit, Closed: errTestClosed, Wake: func() { o.wakes++ }, Account: acct})
	o.q.onWait = func() { o.blocked <- struct{}{} }
	return o
}

// release is the owner's writer writing n bytes.
func (o *owner) release(n int64) {
	o.mu.Lock()
	o.data = o.data[n:]
	o.q.ReleaseLocked(n)
	o.mu.Unlock()
}

// A queue with room of its own still waits while the budget has none for
// its session, counted as a pause, and goes on once another session gives
// bytes back to the pool.
func TestReserveWaitsForBudget(t *testing.T) {
	b := newBudget(t, 300, 100, 2) // pool 100
	hog := newBudgetOwner(1<<20, b.Open())
	small := newBudgetOwner(1<<20, b.Open())
	ctx := context.Background()
	if err := hog.send(ctx, make([]byte, 200)); err != nil { // share + pool
		t.Fatal(err)
	}
	if err := small.send(ctx, make([]byte, 100)); err != nil {
		t.Fatalf("a session's share refused on a full pool: %v", err)
	}
	sent := small.goSend(ctx, make([]byte, 10))
	small.awaitBlocked(t, sent)
	if b.Pauses() != 1 || b.Waiting() != 1 {
		t.Fatalf("Pauses %d, Waiting %d while blocked; want 1, 1", b.Pauses(), b.Waiting())
	}
	hog.release(50)
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
	if b.Waiting() != 0 || b.Used() != 260 {
		t.Fatalf("Waiting %d, Used %d after the wait; want 0, 260", b.Waiting(), b.Used())
	}
	if got := small.q.Queued(); got != 110 {
		t.Fatalf("small queued %d, want 110", got)
	}
}

// A queue waiting for the budget also goes on when its own writer frees
// bytes of its share.
func TestBudgetWaitEndsOnOwnRelease(t *testing.T) {
	b := newBudget(t, 200, 100, 2) // no pool at all
	o := newBudgetOwner(1<<20, b.Open())
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	sent := o.goSend(ctx, make([]byte, 40))
	o.awaitBlocked(t, sent)
	o.release(60)
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 80 || b.Waiting() != 0 {
		t.Fatalf("Used %d, Waiting %d; want 80, 0", b.Used(), b.Waiting())
	}
}

// A pause ends with the sender's context, and with the queue's closing,
// and is no longer counted as waiting either way.
func TestBudgetWaitEnds(t *testing.T) {
	b := newBudget(t, 200, 100, 2)
	o := newBudgetOwner(1<<20, b.Open())
	if err := o.send(context.Background(), make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sent := o.goSend(ctx, make([]byte, 1))
	o.awaitBlocked(t, sent)
	cancel()
	if err := result(t, sent); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	sent = o.goSend(context.Background(), make([]byte, 1))
	o.awaitBlocked(t, sent)
	o.q.Close()
	if err := result(t, sent); !errors.Is(err, errTestClosed) {
		t.Fatalf("got %v, want the owner's closed error", err)
	}
	if b.Waiting() != 0 || b.Pauses() != 2 {
		t.Fatalf("Waiting %d, Pauses %d; want 0, 2", b.Waiting(), b.Pauses())
	}
}

// A message larger than a session could ever get from the budget goes
// when its queue is empty, as one larger than the queue's limit does;
// behind other bytes it waits.
func TestBudgetOversizedMessage(t *testing.T) {
	b := newBudget(t, 300, 100, 2) // an account gets at most 200
	o := newBudgetOwner(1<<20, b.Open())
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 500)); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 500 {
		t.Fatalf("Used %d, want the oversized message counted: 500", b.Used())
	}
	sent := o.goSend(ctx, make([]byte, 500))
	o.awaitBlocked(t, sent)
	o.release(500)
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
}

// What FitsLocked takes and AddLocked counts settle: the account holds what
// is queued, not what was reserved, and SetQueuedLocked recounts it.
func TestBudgetSettles(t *testing.T) {
	b := newBudget(t, 1000, 100, 2)
	acct := b.Open()
	o := newBudgetOwner(1<<20, acct)
	if err := o.q.Reserve(context.Background(), 50); err != nil {
		t.Fatal(err)
	}
	o.q.AddLocked(40) // the owner encoded it smaller than it reserved
	if !o.q.FitsLocked(30) {
		t.Fatal("30 more bytes do not fit")
	}
	o.q.AddLocked(35) // and this one larger
	o.q.AddLocked(5)  // queued past the limit: a close note
	o.mu.Unlock()
	if acct.Held() != 80 {
		t.Fatalf("account holds %d, want the 80 bytes queued", acct.Held())
	}
	o.mu.Lock()
	o.q.SetQueuedLocked(120)
	o.mu.Unlock()
	if acct.Held() != 120 {
		t.Fatalf("account holds %d after a recount to 120", acct.Held())
	}
	o.q.Release(120)
	if b.Used() != 0 {
		t.Fatalf("Used %d after everything was written", b.Used())
	}
}

// An empty queue whose session holds bytes outside it (messages held
// behind a gap) takes the next message, one at a time, rather than wait
// for bytes that only the session's own reads could free; behind other
// bytes of its own it waits for its writer.
func TestBudgetEmptyQueueOfAHolder(t *testing.T) {
	b := newBudget(t, 200, 100, 2) // no pool at all
	acct := b.Open()
	if !acct.TryReserve(90) { // the hold buffer's
		t.Fatal("the share refused")
	}
	o := newBudgetOwner(1<<20, acct)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 30)); err != nil {
		t.Fatal(err)
	}
	if acct.Held() != 120 || b.Pauses() != 0 {
		t.Fatalf("account holds %d, %d pauses; want 120, 0", acct.Held(), b.Pauses())
	}
	sent := o.goSend(ctx, make([]byte, 30))
	o.awaitBlocked(t, sent)
	o.release(30)
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
	if acct.Held() != 120 {
		t.Fatalf("account holds %d, want 120", acct.Held())
	}
}
