package sendq

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tetherproxy/tether/internal/budget"
)

// Options configures a Queue.
type Options struct {
	// Limit bounds the bytes queued before Reserve blocks; it must be > 0.
	Limit int64
	// Closed is the error Reserve returns once the queue is closed: the
	// owner's own sentinel, so its callers check one error whatever the
	// queue.
	Closed error
	// Wake wakes the owner's writer. The Queue calls it with the lock held,
	// once per burst (the first bytes queued after IdleLocked), so it must
	// not block: typically a send on a channel of one slot, nothing when
	// no writer is there, or a note that the caller is the writer now, to
	// write what is queued once it has unlocked (wsconn's callers write
	// inline).
	Wake func()
	// Account, when not nil, is the memory budget's account of the
	// queue's session (internal/budget): the bytes queued are counted on
	// it, and Reserve also waits while the budget cannot give them
	// (backpressure on a session holding more than its share). nil: only
	// Limit bounds the queue.
	Account *budget.Account
}

// Queue counts the bytes an owner has queued towards one writer, blocks its
// senders while they fill Options.Limit, and wakes the writer once per
// burst. See the package documentation for what it does and does not own.
type Queue struct {
	mu   *sync.Mutex
	opts Options

	queued  int64
	closed  atomic.Bool // set under mu, read without it by Closed
	active  bool        // the writer is at work or has been woken
	waiting bool        // a sender waits on space
	// reserved is taken from Options.Account by Reserve or FitsLocked
	// and not yet counted by AddLocked, which settles it.
	reserved int64
	// space is closed when room is made or the queue closes; made by the
	// first sender to wait, and nil again once closed: a queue nobody
	// waits on, which is most of them most of the time, holds none.
	space chan struct{}

	onWait func() // tests: a sender is about to wait
}

// Init readies q, whose owner's data mu guards. It must be called before
// any other method, once.
func (q *Queue) Init(mu *sync.Mutex, opts Options) {
	if opts.Limit <= 0 {
		panic("sendq: Limit must be > 0")
	}
	if opts.Closed == nil || opts.Wake == nil {
		panic("sendq: Closed and Wake are required")
	}
	q.mu, q.opts = mu, opts
}

// Fits reports whether n more bytes may join queued bytes under limit: they
// fit, or nothing is queued (so an oversized message waits only for the
// queue to empty, not for ever).
func Fits(queued, n, limit int64) bool { return queued == 0 || queued+n <= limit }

// Reserve waits until n more bytes fit, and returns nil with the lock held:
// the caller queues its bytes, calls AddLocked, and unlocks. Otherwise it
// returns, without the lock, Options.Closed once the queue is closed, or
// ctx's error.
//
// With an Account, the bytes must also fit in the memory budget: while
// they do not, Reserve waits for bytes to come back to the budget's pool
// (or for the queue's own writer to free some), the pause the budget
// counts. A message larger than the account could ever get (its share and
// the whole pool) is taken when the queue is empty, as one larger than
// Limit is: its bytes were read already. So is any message when the queue
// is empty and the account holds bytes outside it, which the session may
// only free by reading on: waiting would be for ever.
func (q *Queue) Reserve(ctx context.Context, n int64) error {
	acct := q.opts.Account
	var freed <-chan struct{} // armed: a budget wait is registered
	paused := false
	for {
		if q.closed.Load() {
			return q.resumed(paused, q.opts.Closed)
		}
		q.mu.Lock()
		if q.closed.Load() {
			q.mu.Unlock()
			return q.resumed(paused, q.opts.Closed)
		}
		var wait <-chan struct{}
		if Fits(q.queued, n, q.opts.Limit) {
			if q.takeLocked(n) {
				return q.resumed(paused, nil)
			}
			if freed == nil {
				// Register for the pool's next release, then try once more:
				// a release in between would otherwise go unseen.
				q.mu.Unlock()
				freed = acct.Freed()
				if !paused {
					paused = true
					acct.Paused()
				}
				continue
			}
			wait, freed = freed, nil
		}
		q.waiting = true
		if q.space == nil {
			q.space = make(chan struct{})
		}
		space := q.space
		q.mu.Unlock()
		if q.onWait != nil {
			q.onWait()
		}
		select {
		case <-space:
		case <-wait:
		case <-ctx.Done():
			return q.resumed(paused, ctx.Err())
		}
	}
}

// takeLocked takes n bytes from the budget, if there is one, for the next
// AddLocked to settle.
func (q *Queue) takeLocked(n int64) bool {
	acct := q.opts.Account
	if acct == nil {
		return true
	}
	switch {
	case acct.TryReserve(n):
	case q.queued == 0 && (!acct.Budget().Grantable(n) || acct.Held() > q.reserved):
		// An empty queue waits for nothing it could get back by waiting:
		// n is more than the account could ever get, or the session holds
		// bytes outside this queue (messages held behind a gap, pending
		// acknowledgements) that only the reads a pause would stop can
		// free. Such a session goes on one message at a time.
		acct.Reserve(n)
	default:
		return false
	}
	q.reserved += n
	return true
}

// resumed ends a budget pause, if Reserve was in one, and returns err.
func (q *Queue) resumed(paused bool, err error) error {
	if paused {
		q.opts.Account.Resumed()
	}
	return err
}

// FitsLocked reports whether n more bytes fit now, for an owner that
// queues several messages under one Reserve as long as they fit, each as if
// reserved alone.
//
// With an Account, bytes that fit are taken from the budget, as Reserve
// takes them, for the next AddLocked to settle.
func (q *Queue) FitsLocked(n int64) bool {
	return Fits(q.queued, n, q.opts.Limit) && q.takeLocked(n)
}

// AddLocked counts n bytes the owner has just queued and wakes the writer
// if it is idle.
//
// With an Account, n is counted on it: what Reserve took pays for it, any
// rest of that is given back, and bytes queued beyond it (an owner's close
// note, queued past the limit) are counted all the same.
func (q *Queue) AddLocked(n int64) {
	q.queued += n
	if acct := q.opts.Account; acct != nil {
		switch d := n - q.reserved; {
		case d > 0:
			acct.Reserve(d)
		case d < 0:
			acct.Release(-d)
		}
		q.reserved = 0
	}
	q.WakeLocked()
}

// WakeLocked wakes the writer if it is idle, for something queued outside
// the count: a control frame, a close.
func (q *Queue) WakeLocked() {
	if q.active {
		return
	}
	q.active = true
	q.opts.Wake()
}

// IdleLocked records that the writer found nothing to write: the next
// AddLocked or WakeLocked wakes it. The writer calls it in the same critical
// section in which it found the owner's queue empty, so that nothing queued
// in between goes unseen.
func (q *Queue) IdleLocked() { q.active = false }

// Release frees n bytes the writer has written and wakes the senders
// waiting for room.
func (q *Queue) Release(n int64) {
	q.mu.Lock()
	q.ReleaseLocked(n)
	q.mu.Unlock()
}

// ReleaseLocked is Release with the lock held.
func (q *Queue) ReleaseLocked(n int64) {
	q.queued -= n
	if acct := q.opts.Account; acct != nil {
		acct.Release(n)
	}
	q.wakeSendersLocked()
}

// SetQueuedLocked replaces the count by n, for an owner that recounted what
// it holds: an sse:// app that resumes makes events it had written pending
// again, or skips some.
func (q *Queue) SetQueuedLocked(n int64) {
	if acct := q.opts.Account; acct != nil {
		switch d := n - q.queued; {
		case d > 0:
			acct.Reserve(d)
		case d < 0:
			acct.Release(-d)
		}
	}
	q.queued = n
	q.wakeSendersLocked()
}

func (q *Queue) wakeSendersLocked() {
	if q.waiting {
		close(q.space)
		q.space = nil
		q.waiting = false
	}
}

// CloseLocked closes the queue: Reserve fails from now on, and senders
// waiting in it return Options.Closed. It reports whether this call closed
// it; later calls do nothing.
func (q *Queue) CloseLocked() bool {
	if q.closed.Load() {
		return false
	}
	q.closed.Store(true)
	q.wakeSendersLocked()
	return true
}

// Close is CloseLocked for a caller that does not hold the lock.
func (q *Queue) Close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.CloseLocked()
}

// Closed reports whether the queue is closed. It takes no lock, so an owner
// may refuse a message before doing any work on it.
func (q *Queue) Closed() bool { return q.closed.Load() }

// Queued reports the bytes counted as queued.
func (q *Queue) Queued() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// Waiting reports whether a sender is blocked in Reserve, so that a test
// can tell a blocked sender from one that has not started.
func (q *Queue) Waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}
