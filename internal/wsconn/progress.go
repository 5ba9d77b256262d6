package wsconn

// WriteProgress reports how far the peer has acknowledged what this
// connection wrote: acked counts the bytes its TCP acknowledged (the
// kernel's count, which rises only as the peer takes them in), and backlog
// tells whether more wait behind them, queued here or written and not sent
// yet. Under a backlog a rising count proves the peer reading, however long
// an answer to a probe queued behind it takes; an idle connection's
// acknowledgements prove only that the peer's kernel is up. ok is false
// where the system does not say (off Linux, a unix socket): the owner must
// not take anything from it then.
//
// It makes one system call; the owner's heartbeat calls it at each wake-up.
func (c *Conn) WriteProgress() (acked uint64, backlog, ok bool) {
	acked, notSent, ok := c.counters().read()
	if !ok {
		return 0, false, false
	}
	return acked, notSent > 0, true
}

// Unread reports how many bytes the peer has sent that wait in the kernel's
// receive queue, not yet read by the reader (for TLS, bytes of records). An
// owner's heartbeat asks it before declaring a quiet connection dead: bytes
// waiting there mean the peer has spoken and the reader has not run since,
// so the silence is this process's, not the connection's. It is 0 when
// nothing waits, and where the system does not say (off Linux, no
// descriptor). It makes one system call.
func (c *Conn) Unread() int {
	return c.counters().unread()
}

// Unwritten reports frames waiting in this Conn's queue (data, or a ping or
// pong) while the kernel's send queue is empty: everything written so far
// has been acknowledged, and the writer has not written what waits since,
// though nothing holds it back. An owner's heartbeat asks it before
// declaring a quiet connection dead: a probe still in the queue has not
// reached the peer, so its silence is this process's (a starved writer),
// not the connection's. A writer blocked by a peer that stopped reading or
// acknowledging leaves bytes in the kernel's queue, and is not reported.
// It is false where the system does not say (off Linux, no descriptor), and
// makes one system call when frames wait.
func (c *Conn) Unwritten() bool {
	if c.q.Queued() == 0 && c.ctrlUnwritten.Load() == 0 {
		return false
	}
	n, ok := c.counters().sendQueue()
	return ok && n == 0
}
