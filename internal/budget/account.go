package budget

import "sync/atomic"

// Account is one session's part of a Budget: what its buffers hold. The
// first Share bytes it holds are its own; bytes beyond them come from the
// pool. An Account is safe for concurrent use by all its session's buffers.
type Account struct {
	b      *Budget
	held   atomic.Int64
	lent   atomic.Int64 // Borrow's bytes: counted in Used, drawn on the pool, never on the share
	closed atomic.Bool
}

// beyond returns the part of held bytes that comes from the pool.
func (a *Account) beyond(held int64) int64 { return max(0, held-a.b.opts.Share) }

// TryReserve takes n more bytes for the account and reports whether it got
// them: always within the account's share, from the pool beyond it while
// the pool lasts. A closed account takes anything and counts nothing: its
// session is ending and its buffers with it.
func (a *Account) TryReserve(n int64) bool {
	for {
		if a.closed.Load() {
			return true
		}
		h := a.held.Load()
		more := a.beyond(h+n) - a.beyond(h)
		if more > 0 && !a.b.takePool(more) {
			return false
		}
		if a.held.CompareAndSwap(h, h+n) {
			a.b.used.Add(n)
			a.closedUnder()
			return true
		}
		if more > 0 {
			a.b.givePool(more) // held moved under us: try again from the start
		}
	}
}

// Reserve takes n bytes whether or not they fit, for a buffer that must
// count what it already holds (a recount); TryReserve is the rule for new
// bytes.
func (a *Account) Reserve(n int64) {
	for {
		if a.closed.Load() {
			return
		}
		h := a.held.Load()
		if a.held.CompareAndSwap(h, h+n) {
			a.b.pooled.Add(a.beyond(h+n) - a.beyond(h))
			a.b.used.Add(n)
			a.closedUnder()
			return
		}
	}
}

// Borrow counts n bytes of a buffer the account's session borrows from a
// pool shared by all connections for as long as it uses it (a socket's read
// buffer, one a message is reassembled in, internal/wsconn): in Used and
// Held, and taken from the pool whether or not the pool has them, never
// from the account's share. Such buffers are the price of reading at all,
// not what a session keeps: taking them from the share would leave a busy
// session less than its share for what it keeps (the hold buffer, the
// outbox), whose overflow policies drop or close, while the pool they take
// from makes the sessions holding the most pause sooner, as the memory
// they stand for is gone. Like Reserve it never fails: a reader frees them
// only by reading on.
func (a *Account) Borrow(n int64) {
	for {
		if a.closed.Load() {
			return
		}
		l := a.lent.Load()
		if a.lent.CompareAndSwap(l, l+n) {
			a.b.pooled.Add(n)
			a.b.used.Add(n)
			a.closedUnder()
			return
		}
	}
}

// Return gives back n bytes Borrow counted. After Close it does nothing:
// Close gave everything back.
func (a *Account) Return(n int64) {
	for {
		if a.closed.Load() {
			return
		}
		l := a.lent.Load()
		m := min(n, l)
		if a.lent.CompareAndSwap(l, l-m) {
			a.b.used.Add(-m)
			if m > 0 {
				a.b.givePool(m)
			}
			return
		}
	}
}

// Release gives back n bytes the account's buffers no longer hold. A
// release after Close does nothing: Close gave everything back.
func (a *Account) Release(n int64) {
	for {
		if a.closed.Load() {
			return
		}
		h := a.held.Load()
		m := min(n, h)
		if a.held.CompareAndSwap(h, h-m) {
			a.b.used.Add(-m)
			if less := a.beyond(h) - a.beyond(h-m); less > 0 {
				a.b.givePool(less)
			}
			return
		}
	}
}

// Close gives back everything the account holds; its session has ended.
// Later calls do nothing.
func (a *Account) Close() {
	if a.closed.Swap(true) {
		return
	}
	a.giveAll()
}

// closedUnder gives back what a reservation just took if Close came in
// between its check and its count.
func (a *Account) closedUnder() {
	if a.closed.Load() {
		a.giveAll()
	}
}

// giveAll gives back everything held. Close and a reservation that raced
// it may both call it: each gives back what its Swap took.
func (a *Account) giveAll() {
	h := a.held.Swap(0)
	l := a.lent.Swap(0)
	a.b.used.Add(-h - l)
	if p := a.beyond(h) + l; p > 0 {
		a.b.givePool(p)
	}
}

// Held returns the bytes the account holds, borrowed buffers included.
func (a *Account) Held() int64 { return a.held.Load() + a.lent.Load() }

// Budget returns the budget the account draws on.
func (a *Account) Budget() *Budget { return a.b }

// Freed returns a channel closed the next time bytes come back to the pool.
// The caller's TryReserve failed: it tries again after Freed (a release may
// have come in between), and waits on the channel if that fails too.
func (a *Account) Freed() <-chan struct{} { return a.b.freedChan() }

// Paused counts a pause: a reservation of the account's session waits for
// the pool. Resumed ends it, once the wait is over however it ends.
func (a *Account) Paused() {
	a.b.pauses.Add(1)
	a.b.waiting.Add(1)
}

// Resumed ends the pause Paused counted.
func (a *Account) Resumed() { a.b.waiting.Add(-1) }
