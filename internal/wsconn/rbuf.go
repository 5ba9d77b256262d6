package wsconn

import (
	"sync"
	"sync/atomic"

	"github.com/tetherproxy/tether/internal/budget"
)

// rbuf is a buffer of readBufferSize bytes a connection borrows from a pool
// only while it needs one: the read buffer while bytes wait in it, the
// reassembly and inflation buffers while a message is read. An idle
// connection holds none, however busy it was before.
type rbuf struct{ b []byte }

var rbufPool = sync.Pool{New: func() any { return &rbuf{b: make([]byte, readBufferSize)} }}

// borrow takes a buffer from the pool and counts it on the connection's
// account until giveBack.
func (c *Conn) borrow() *rbuf {
	c.held.take(readBufferSize)
	return rbufPool.Get().(*rbuf)
}

// giveBack returns a buffer borrow took.
func (c *Conn) giveBack(b *rbuf) {
	rbufPool.Put(b)
	c.held.give(readBufferSize)
}

// holdings counts on Options.Account what the connection's reader borrows
// (docs/design.md "Memory"): its buffers and the inflater's state, with
// budget.Account.Borrow, so they take from the budget's pool and leave the
// session's share to what it keeps. Like the reassembly it never waits and
// takes the bytes even on a full budget: the reader frees them only by
// reading on, and a reader waiting on the budget would leave the peer's
// pongs and close frame unread. It is settled when the connection ends
// (end): an upstream session's next connection counts on the same account,
// and what a lost connection's reader still held must not stay counted
// with it, whether or not its reader ever runs again.
type holdings struct {
	acct *budget.Account // nil: counted for Held only
	n    atomic.Int64    // held now; -1 once the connection ended
}

// take counts n more bytes, unless the connection has ended.
func (h *holdings) take(n int64) {
	if h.acct != nil {
		h.acct.Borrow(n) // first, so that an end racing this gives back no more than was taken
	}
	for {
		s := h.n.Load()
		if s < 0 {
			if h.acct != nil {
				h.acct.Return(n)
			}
			return
		}
		if h.n.CompareAndSwap(s, s+n) {
			return
		}
	}
}

// give counts n fewer bytes, unless the connection has ended (end gave
// everything back).
func (h *holdings) give(n int64) {
	for {
		s := h.n.Load()
		if s < 0 {
			return
		}
		if h.n.CompareAndSwap(s, s-n) {
			if h.acct != nil {
				h.acct.Return(n)
			}
			return
		}
	}
}

// end gives back everything counted; take and give count nothing after it.
func (h *holdings) end() {
	if s := h.n.Swap(-1); s > 0 && h.acct != nil {
		h.acct.Return(s)
	}
}

// Held reports the bytes the connection's reader has borrowed now (its
// buffers, the inflater's state), which count on Options.Account; 0 once
// the connection has ended. A message that outgrew its buffer counts on
// the account too, by its size, but not here.
func (c *Conn) Held() int64 { return max(0, c.held.n.Load()) }
