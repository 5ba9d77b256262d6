package sendq

import "sync"

// Buf is a run of whole encoded messages waiting to be written: an owner's
// queue is made of them, and a Batch holds one. Bufs are pooled, so the
// steady state allocates nothing and an idle socket holds none.
type Buf struct {
	B     []byte // encoded messages, in the owner's encoding
	Count int64  // bytes counted against the queue's limit (a WebSocket frame counts its payload)
	Final bool   // ends with the owner's last bytes (a close frame): nothing is written after them
}

// BufBytes is how many bytes a new Buf holds before it grows: the unit of
// one write for owners that write their queue Buf by Buf, so that a control
// frame waits for at most one Buf of backlog. Filling a Buf up to this size
// never copies what it already holds.
const BufBytes = 64 << 10

// maxPooledBuf keeps one huge message from pinning its buffer in the pool.
const maxPooledBuf = 4 * BufBytes

var bufPool = sync.Pool{New: func() any { return &Buf{B: make([]byte, 0, BufBytes)} }}

// GetBuf returns an empty Buf from the pool.
func GetBuf() *Buf { return bufPool.Get().(*Buf) }

// PutBuf empties w and returns it to the pool; w must not be used after.
func PutBuf(w *Buf) {
	if cap(w.B) > maxPooledBuf {
		return // the pool makes a BufBytes one when it runs short
	}
	w.B, w.Count, w.Final = w.B[:0], 0, false
	bufPool.Put(w)
}
