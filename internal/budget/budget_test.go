package budget

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

func newBudget(t testing.TB, limit, share int64, sessions int) *Budget {
	t.Helper()
	b, err := New(Options{Limit: limit, Share: share, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOptionsCheck(t *testing.T) {
	tests := []struct {
		opts Options
		want string // "" for valid
	}{
		{Options{Limit: 100, Share: 10, Sessions: 10}, ""},
		{Options{Limit: 100, Share: 10, Sessions: 1}, ""},
		{Options{Limit: 0, Share: 10, Sessions: 1}, "Limit must be > 0"},
		{Options{Limit: 100, Share: 0, Sessions: 1}, "Share must be > 0"},
		{Options{Limit: 100, Share: 10, Sessions: 0}, "Sessions must be > 0"},
		{Options{Limit: 100, Share: 10, Sessions: 11}, "exceeds Limit"},
		{Options{Limit: 1 << 40, Share: 1 << 30, Sessions: 1 << 20}, "exceeds Limit"}, // no overflow
	}
	for _, tt := range tests {
		err := tt.opts.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.opts, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want an error containing %q", tt.opts, err, tt.want)
		}
	}
}

// An account always gets its share, however full the pool; beyond its
// share it gets what the pool has left, and no more.
func TestShareIsGuaranteed(t *testing.T) {
	b := newBudget(t, 100, 10, 5) // pool 50
	hog, small := b.Open(), b.Open()
	if !hog.TryReserve(60) { // share 10 + the whole pool
		t.Fatal("hog did not get its share and the pool")
	}
	if hog.TryReserve(1) {
		t.Fatal("hog got a byte beyond share + pool")
	}
	if !b.Full() || b.Pooled() != 50 {
		t.Fatalf("Full %v, Pooled %d, want a full pool of 50", b.Full(), b.Pooled())
	}
	for i := range 10 {
		if !small.TryReserve(1) {
			t.Fatalf("byte %d of small's share refused while the pool is full", i)
		}
	}
	if small.TryReserve(1) {
		t.Fatal("small got a byte beyond its share from a full pool")
	}
	if b.Used() != 70 || hog.Held() != 60 || small.Held() != 10 {
		t.Fatalf("Used %d, hog %d, small %d; want 70, 60, 10", b.Used(), hog.Held(), small.Held())
	}
	hog.Release(5)
	if !small.TryReserve(5) {
		t.Fatal("small did not get the 5 bytes hog gave back to the pool")
	}
	if b.Pooled() != 50 || b.Used() != 70 {
		t.Fatalf("Pooled %d, Used %d, want 50, 70", b.Pooled(), b.Used())
	}
}

// A release only gives the pool what was drawn from it: bytes within the
// share stay the account's.
func TestReleaseWithinShare(t *testing.T) {
	b := newBudget(t, 100, 10, 5)
	a := b.Open()
	a.TryReserve(25) // 15 from the pool
	a.Release(20)    // 5 left, all within the share
	if b.Pooled() != 0 || b.Used() != 5 || a.Held() != 5 {
		t.Fatalf("Pooled %d, Used %d, Held %d; want 0, 5, 5", b.Pooled(), b.Used(), a.Held())
	}
	a.Release(50) // more than held: clamped, never negative
	if b.Used() != 0 || a.Held() != 0 {
		t.Fatalf("Used %d, Held %d after an excess release; want 0, 0", b.Used(), a.Held())
	}
}

// Reserve counts what a buffer already holds even past the pool; the
// account then gets nothing more beyond its share until it is back under.
func TestForcedReserve(t *testing.T) {
	b := newBudget(t, 100, 10, 5)
	a, other := b.Open(), b.Open()
	a.Reserve(80) // 70 beyond the share, the pool is 50
	if b.Pooled() != 70 || !b.Full() {
		t.Fatalf("Pooled %d, Full %v; want 70, true", b.Pooled(), b.Full())
	}
	if other.TryReserve(11) {
		t.Fatal("other drew on an overdrawn pool")
	}
	if !other.TryReserve(10) {
		t.Fatal("other did not get its share from an overdrawn pool")
	}
	a.Release(80)
	if b.Pooled() != 0 || b.Used() != 10 {
		t.Fatalf("Pooled %d, Used %d; want 0, 10", b.Pooled(), b.Used())
	}
}

// Close gives everything back; the closed account counts nothing more.
func TestClose(t *testing.T) {
	b := newBudget(t, 100, 10, 5)
	a := b.Open()
	a.TryReserve(40)
	a.Close()
	a.Close()
	if b.Used() != 0 || b.Pooled() != 0 {
		t.Fatalf("Used %d, Pooled %d after Close; want 0, 0", b.Used(), b.Pooled())
	}
	if !a.TryReserve(1000) {
		t.Fatal("a closed account refused a reservation its ending buffer makes")
	}
	a.Reserve(1000)
	a.Release(30)
	if b.Used() != 0 || b.Pooled() != 0 {
		t.Fatalf("Used %d, Pooled %d: a closed account counted bytes", b.Used(), b.Pooled())
	}
}

// A waiter is woken when bytes come back to the pool, and the wait is
// counted while it lasts and after.
func TestFreedWakesWaiter(t *testing.T) {
	b := newBudget(t, 100, 10, 5)
	hog, waiter := b.Open(), b.Open()
	hog.TryReserve(60)
	waiter.TryReserve(10)
	if waiter.TryReserve(5) {
		t.Fatal("reservation beyond the share succeeded on a full pool")
	}
	freed := waiter.Freed()
	waiter.Paused()
	if waiter.TryReserve(5) {
		t.Fatal("retry after Freed succeeded with nothing released")
	}
	if b.Pauses() != 1 || b.Waiting() != 1 {
		t.Fatalf("Pauses %d, Waiting %d; want 1, 1", b.Pauses(), b.Waiting())
	}
	select {
	case <-freed:
		t.Fatal("freed closed before anything was released")
	default:
	}
	hog.Release(3) // within the pool part of hog's holding
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("freed not closed after bytes came back to the pool")
	}
	waiter.Resumed()
	if !waiter.TryReserve(3) {
		t.Fatal("the woken waiter did not get the freed bytes")
	}
	if b.Waiting() != 0 || b.Pauses() != 1 {
		t.Fatalf("Waiting %d, Pauses %d after the wait; want 0, 1", b.Waiting(), b.Pauses())
	}
}

// Many accounts reserving and releasing at once, some waiting for the pool:
// the pool is never overdrawn, no waiter is left behind, and everything
// comes back.
func TestConcurrentAccounts(t *testing.T) {
	const limit, share, sessions, rounds = 1 << 16, 1 << 10, 16, 2000
	b := newBudget(t, limit, share, sessions)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var over []int64
	for s := range sessions {
		wg.Go(func() {
			a := b.Open()
			defer a.Close()
			r := rand.New(rand.NewPCG(uint64(s), 1))
			var held []int64
			for range rounds {
				n := r.Int64N(4 * share)
				for !a.TryReserve(n) {
					freed := a.Freed()
					a.Paused()
					if a.TryReserve(n) {
						a.Resumed()
						break
					}
					// Give back what we hold so that no one waits for ever.
					for _, h := range held {
						a.Release(h)
					}
					held = held[:0]
					select {
					case <-freed:
					case <-time.After(time.Millisecond):
					}
					a.Resumed()
				}
				held = append(held, n)
				if p := b.Pooled(); p > b.Pool() {
					mu.Lock()
					over = append(over, p)
					mu.Unlock()
				}
				if len(held) > 4 || r.IntN(2) == 0 {
					a.Release(held[0])
					held = held[1:]
				}
			}
		})
	}
	wg.Wait()
	if len(over) > 0 {
		t.Errorf("pool overdrawn %d times, first %d of %d", len(over), over[0], b.Pool())
	}
	if b.Used() != 0 || b.Pooled() != 0 || b.Waiting() != 0 {
		t.Errorf("after every account closed: Used %d, Pooled %d, Waiting %d; want 0", b.Used(), b.Pooled(), b.Waiting())
	}
}

// Reservations racing Close never leave bytes counted on a closed account.
func TestReserveRacingClose(t *testing.T) {
	b := newBudget(t, 1<<20, 100, 4)
	for range 200 {
		a := b.Open()
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 50 {
				a.TryReserve(70)
				a.Reserve(10)
			}
		})
		wg.Go(a.Close)
		wg.Wait()
		a.Close()
	}
	if b.Used() != 0 || b.Pooled() != 0 {
		t.Fatalf("Used %d, Pooled %d after every account closed; want 0, 0", b.Used(), b.Pooled())
	}
}
