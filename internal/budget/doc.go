// Package budget is tether's one memory budget (TETHER_MEMORY_LIMIT): the
// sum of what every session buffers, bounded by one number, where each
// buffer's own cap (TETHER_DOWNSTREAM_BUFFER_BYTES and the others) bounds
// one session only.
//
// A Budget of Limit bytes is split in two. Each of the Sessions sessions
// tether admits at most (TETHER_MAX_SESSIONS) is guaranteed a Share of its
// own (TETHER_MEMORY_SESSION_SHARE): Sessions × Share is set aside, so a
// session always gets its first Share bytes at once, whatever the others
// hold. What is left, the pool, is shared: a session that needs more than its
// Share draws on it while it lasts. One session can therefore never take the
// whole budget, and the sum of all sessions' holdings never exceeds Limit.
//
// Each session holds an Account. A buffer reserves bytes on it before it
// keeps them (TryReserve) and releases them when it lets them go (Release);
// Close gives back whatever the account still holds when the session ends.
// The buffers a connection borrows only while it reads (internal/wsconn)
// are counted with Borrow and Return instead: in Used, and taken from the
// pool, never from the share, which stays whole for what a session keeps.
// When the pool cannot give what a reservation needs, TryReserve fails and
// the buffer applies backpressure: it waits (Freed) for bytes to come back
// to the pool, its session's upstream reads paused meanwhile. Only sessions
// holding more than their Share wait, so the sessions holding the most are
// the ones that pause while the others keep flowing; each wait is counted
// (Pauses) and the sessions waiting now are counted too (Waiting). A buffer
// whose policy is to drop or close rather than wait applies that policy
// instead (the budget counts nothing for it: the buffer's own counters do).
//
// The hot path is lock-free: a reservation within the Share is two atomic
// additions, one beyond it a compare-and-swap on the pool. A mutex is taken
// only to wait and to wake waiters, and nothing is allocated unless a
// session waits.
//
// Concurrency contract: a Budget and its Accounts are safe for concurrent
// use. The package starts no goroutine and does no I/O.
package budget
