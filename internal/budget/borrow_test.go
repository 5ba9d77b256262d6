package budget

import "testing"

// A borrowed buffer counts in Used and Held and takes from the pool, past
// it if need be, never from the share: the session still gets its whole
// share for what it keeps, while a session that needs the pool waits until
// the buffer is returned.
func TestBorrowTakesFromThePool(t *testing.T) {
	b := newBudget(t, 100, 10, 5) // pool 50
	busy, other := b.Open(), b.Open()
	busy.Borrow(64)
	if b.Used() != 64 || busy.Held() != 64 || b.Pooled() != 64 || !b.Full() {
		t.Fatalf("after Borrow(64): Used %d, Held %d, Pooled %d, Full %v; want 64, 64, 64, true",
			b.Used(), busy.Held(), b.Pooled(), b.Full())
	}
	if !busy.TryReserve(10) {
		t.Fatal("the borrowing account did not get its share")
	}
	if busy.TryReserve(1) || other.TryReserve(11) {
		t.Fatal("a reservation beyond a share got bytes from a pool the buffer took")
	}
	freed := other.Freed()
	busy.Return(64)
	select {
	case <-freed:
	default:
		t.Fatal("returning a buffer did not wake the sessions waiting for the pool")
	}
	if !other.TryReserve(11) {
		t.Fatal("the pool had no room once the buffer was returned")
	}
	if b.Used() != 21 || busy.Held() != 10 {
		t.Fatalf("Used %d, busy holds %d; want 21, 10", b.Used(), busy.Held())
	}
	busy.Return(1) // more than it borrowed: nothing
	if busy.Held() != 10 || b.Used() != 21 {
		t.Fatalf("a Return beyond what was borrowed changed the counts: Held %d, Used %d", busy.Held(), b.Used())
	}
}

// Close gives back what an account borrowed too, and a Return after it
// (a reader that ran on) changes nothing.
func TestCloseGivesBorrowedBack(t *testing.T) {
	b := newBudget(t, 100, 10, 5)
	a := b.Open()
	a.Borrow(64)
	a.Reserve(5)
	a.Close()
	if b.Used() != 0 || b.Pooled() != 0 || a.Held() != 0 {
		t.Fatalf("after Close: Used %d, Pooled %d, Held %d; want 0", b.Used(), b.Pooled(), a.Held())
	}
	a.Return(64)
	a.Borrow(64)
	if b.Used() != 0 || b.Pooled() != 0 {
		t.Fatalf("after Close, Return and Borrow: Used %d, Pooled %d; want 0", b.Used(), b.Pooled())
	}
}
