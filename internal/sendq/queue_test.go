package sendq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// testTimeout bounds waits that end at once when the queue works.
const testTimeout = 5 * time.Second

var errTestClosed = errors.New("test owner closed")

// owner is the smallest queue owner: bytes under a lock, a count of the
// writer's wake-ups, and a channel that receives a value each time a sender
// is about to wait in Reserve.
type owner struct {
	mu      sync.Mutex
	q       Queue
	data    []byte
	wakes   int
	blocked chan struct{}
}

func newOwner(limit int64) *owner {
	o := &owner{blocked: make(chan struct{}, 16)}
	o.q.Init(&o.mu, Options{Limit: limit, Closed: errTestClosed, Wake: func() { o.wakes++ }})
	o.q.onWait = func() { o.blocked <- struct{}{} }
	return o
}

// send queues p as one message.
func (o *owner) send(ctx context.Context, p []byte) error {
	if err := o.q.Reserve(ctx, int64(len(p))); err != nil {
		return err
	}
	o.data = append(o.data, p...)
	o.q.AddLocked(int64(len(p)))
	o.mu.Unlock()
	return nil
}

// goSend sends p on a goroutine of its own and reports the result.
func (o *owner) goSend(ctx context.Context, p []byte) <-chan error {
	done := make(chan error, 1)
	go func() { done <- o.send(ctx, p) }()
	return done
}

// awaitBlocked returns once a sender waits in Reserve; sent is its result,
// which must not come first.
func (o *owner) awaitBlocked(t *testing.T, sent <-chan error) {
	t.Helper()
	select {
	case <-o.blocked:
	case err := <-sent:
		t.Fatalf("send returned %v instead of blocking", err)
	case <-time.After(testTimeout):
		t.Fatal("send neither blocked nor returned")
	}
	if !o.q.Waiting() {
		t.Fatal("a sender is about to wait, but Waiting reports none")
	}
}

func result(t *testing.T, sent <-chan error) error {
	t.Helper()
	select {
	case err := <-sent:
		return err
	case <-time.After(testTimeout):
		t.Fatal("blocked send did not return")
		return nil
	}
}

func TestFits(t *testing.T) {
	tests := []struct {
		queued, n, limit int64
		want             bool
	}{
		{0, 10, 100, true},
		{90, 10, 100, true},
		{91, 10, 100, false},
		{0, 1000, 100, true}, // an oversized message passes alone
		{1, 1000, 100, false},
		{100, 0, 100, true},
	}
	for _, tc := range tests {
		if got := Fits(tc.queued, tc.n, tc.limit); got != tc.want {
			t.Errorf("Fits(%d, %d, %d) = %v, want %v", tc.queued, tc.n, tc.limit, got, tc.want)
		}
	}
}

// A sender that would take the queue past its limit waits until the
// writer frees enough, then queues.
func TestReserveBlocksWhileFull(t *testing.T) {
	o := newOwner(100)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	sent := o.goSend(ctx, make([]byte, 50))
	o.awaitBlocked(t, sent)
	if q := o.q.Queued(); q != 60 {
		t.Fatalf("queued %d while the sender waits, want 60", q)
	}
	o.q.Release(20) // 40 + 50 still exceeds nothing: it fits now
	if err := result(t, sent); err != nil {
		t.Fatalf("send after release: %v", err)
	}
	if q := o.q.Queued(); q != 90 {
		t.Fatalf("queued %d, want 90", q)
	}
}

// A release that leaves too little room wakes the sender, which waits again.
func TestReserveWaitsAgainAfterPartialRelease(t *testing.T) {
	o := newOwner(100)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	sent := o.goSend(ctx, make([]byte, 50))
	o.awaitBlocked(t, sent)
	o.q.Release(10) // 90 + 50 > 100
	o.awaitBlocked(t, sent)
	o.q.Release(40)
	if err := result(t, sent); err != nil {
		t.Fatalf("send after the second release: %v", err)
	}
}

// An empty queue takes a message larger than the limit, so it cannot wait
// for ever; anything after it waits for it to be written.
func TestOversizedPassesAlone(t *testing.T) {
	o := newOwner(100)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 1000)); err != nil {
		t.Fatalf("oversized send on an empty queue: %v", err)
	}
	sent := o.goSend(ctx, []byte{1})
	o.awaitBlocked(t, sent)
	o.q.Release(1000)
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
}

// Closing wakes a blocked sender with the owner's error, refuses later
// ones at once, and happens once.
func TestCloseWhileSenderWaits(t *testing.T) {
	o := newOwner(10)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	sent := o.goSend(ctx, make([]byte, 10))
	o.awaitBlocked(t, sent)
	if !o.q.Close() {
		t.Fatal("first Close reported the queue closed already")
	}
	if err := result(t, sent); !errors.Is(err, errTestClosed) {
		t.Fatalf("blocked send after Close: %v, want the owner's error", err)
	}
	if err := o.send(ctx, []byte{1}); !errors.Is(err, errTestClosed) {
		t.Fatalf("send after Close: %v, want the owner's error", err)
	}
	if o.q.Close() || !o.q.Closed() {
		t.Fatal("second Close closed the queue again, or Closed is false")
	}
	if q := o.q.Queued(); q != 10 {
		t.Fatalf("queued %d after Close, want the 10 bytes still there", q)
	}
}

// A sender waiting for room gives up when its context ends.
func TestReserveContext(t *testing.T) {
	o := newOwner(10)
	if err := o.send(context.Background(), make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sent := o.goSend(ctx, make([]byte, 10))
	o.awaitBlocked(t, sent)
	cancel()
	if err := result(t, sent); !errors.Is(err, context.Canceled) {
		t.Fatalf("send after cancel: %v, want context.Canceled", err)
	}
}

// The writer is woken once per burst: by the first bytes queued after it
// said it was idle, not by every message.
func TestWakeOncePerBurst(t *testing.T) {
	o := newOwner(1 << 20)
	ctx := context.Background()
	for range 3 {
		if err := o.send(ctx, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if o.wakes != 1 {
		t.Fatalf("%d wake-ups for one burst, want 1", o.wakes)
	}
	o.mu.Lock()
	o.q.WakeLocked() // a control frame while the writer is at work
	o.q.IdleLocked() // the writer found the queue empty
	o.mu.Unlock()
	if err := o.send(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.q.WakeLocked()
	o.mu.Unlock()
	if o.wakes != 2 {
		t.Fatalf("%d wake-ups for two bursts, want 2", o.wakes)
	}
}

// An owner that recounts what it holds (a rewind, a skip) wakes a sender
// the new count leaves room for.
func TestSetQueued(t *testing.T) {
	o := newOwner(100)
	ctx := context.Background()
	if err := o.send(ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	sent := o.goSend(ctx, make([]byte, 30))
	o.awaitBlocked(t, sent)
	o.mu.Lock()
	o.q.SetQueuedLocked(70)
	o.mu.Unlock()
	if err := result(t, sent); err != nil {
		t.Fatal(err)
	}
	if q := o.q.Queued(); q != 100 {
		t.Fatalf("queued %d, want 100", q)
	}
}

func TestInitChecks(t *testing.T) {
	var mu sync.Mutex
	for name, opts := range map[string]Options{
		"no limit":  {Closed: errTestClosed, Wake: func() {}},
		"no error":  {Limit: 1, Wake: func() {}},
		"no wakeup": {Limit: 1, Closed: errTestClosed},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Init accepted incomplete options")
				}
			}()
			var q Queue
			q.Init(&mu, opts)
		})
	}
}
