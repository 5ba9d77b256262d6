package budget

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Options configures a Budget.
type Options struct {
	Limit    int64 // most bytes held by all accounts together; > 0
	Share    int64 // bytes guaranteed to each account; > 0
	Sessions int   // most accounts open at once; Sessions × Share ≤ Limit
}

// Check reports what is wrong with o, naming the field.
func (o Options) Check() error {
	switch {
	case o.Limit <= 0:
		return fmt.Errorf("budget: Limit must be > 0, got %d", o.Limit)
	case o.Share <= 0:
		return fmt.Errorf("budget: Share must be > 0, got %d", o.Share)
	case o.Sessions <= 0:
		return fmt.Errorf("budget: Sessions must be > 0, got %d", o.Sessions)
	case o.Share > o.Limit/int64(o.Sessions):
		return fmt.Errorf("budget: Sessions × Share = %d × %d exceeds Limit %d", o.Sessions, o.Share, o.Limit)
	}
	return nil
}

// Budget is the memory budget all sessions draw on. See the package
// documentation for how it is shared.
type Budget struct {
	opts Options
	pool int64 // Limit - Sessions × Share

	used    atomic.Int64  // bytes held by all accounts
	pooled  atomic.Int64  // bytes held beyond the accounts' shares, ≤ pool
	pauses  atomic.Uint64 // reservations that had to wait
	waiting atomic.Int64  // accounts waiting now
	// waiters is set once someone may wait on freed; a release that gives
	// bytes back to the pool then closes freed and replaces it.
	waiters atomic.Bool
	mu      sync.Mutex
	freed   chan struct{}
}

// New returns an empty Budget. It fails when opts do not hold together
// (Options.Check): configuration validation says so first, naming the
// variables.
func New(opts Options) (*Budget, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	return &Budget{
		opts:  opts,
		pool:  opts.Limit - int64(opts.Sessions)*opts.Share,
		freed: make(chan struct{}),
	}, nil
}

// Limit returns the most bytes all accounts may hold together.
func (b *Budget) Limit() int64 { return b.opts.Limit }

// Share returns the bytes guaranteed to each account.
func (b *Budget) Share() int64 { return b.opts.Share }

// Pool returns the bytes shared beyond the guaranteed shares.
func (b *Budget) Pool() int64 { return b.pool }

// Used returns the bytes all accounts hold now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Pooled returns the bytes accounts hold beyond their shares now.
func (b *Budget) Pooled() int64 { return b.pooled.Load() }

// Pauses returns how many reservations have had to wait for the pool.
func (b *Budget) Pauses() uint64 { return b.pauses.Load() }

// Waiting returns how many accounts wait for the pool now: sessions whose
// upstream reads the budget pauses.
func (b *Budget) Waiting() int64 { return b.waiting.Load() }

// Full reports whether the pool is spent: from now on only reservations
// within a session's share succeed.
func (b *Budget) Full() bool { return b.pooled.Load() >= b.pool }

// Grantable reports whether an account could ever get n bytes at once:
// its share and the whole pool. A buffer takes a larger message anyway
// when it holds nothing else (its bytes were read already), or it would
// wait for ever.
func (b *Budget) Grantable(n int64) bool { return n <= b.opts.Share+b.pool }

// Open returns a new, empty Account.
func (b *Budget) Open() *Account { return &Account{b: b} }

// takePool takes n bytes from the pool if they are there.
func (b *Budget) takePool(n int64) bool {
	for {
		p := b.pooled.Load()
		if p+n > b.pool {
			return false
		}
		if b.pooled.CompareAndSwap(p, p+n) {
			return true
		}
	}
}

// givePool returns n bytes to the pool and wakes whoever waits for them.
func (b *Budget) givePool(n int64) {
	b.pooled.Add(-n)
	if b.waiters.Load() {
		b.mu.Lock()
		b.waiters.Store(false)
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// freedChan returns a channel closed the next time bytes come back to the
// pool. The caller tries again after taking it, so that a release between
// its failed try and this call is not missed.
func (b *Budget) freedChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters.Store(true)
	return b.freed
}
