package sendq

// Batch is a run of messages encoded by one queue's owner outside its lock,
// to be queued together: one Reserve, one lock and at most one wake-up of
// the writer for all of them, where a message at a time takes the lock
// once per message. A reader forwarding a burst of small messages it read
// in one go otherwise spends much of its time in that lock, fighting the
// writer for it: through tether on loopback (tether-bench, 64-byte
// messages), batches took throughput from 3.6 to 4.3 million messages a
// second.
//
// The owner encodes into the Batch (Add) and queues it (Take); the
// Batch's user only counts what it holds (Len, Bytes) to decide when to pass
// it on. A Batch is used by one goroutine at a time, with one owner. The
// zero Batch is empty and ready; it holds a Buf only while it holds
// messages.
type Batch struct {
	buf  *Buf
	msgs int
}

// Len returns how many messages b holds.
func (b *Batch) Len() int { return b.msgs }

// Bytes returns the bytes b's messages count against the queue's limit.
func (b *Batch) Bytes() int64 {
	if b.buf == nil {
		return 0
	}
	return b.buf.Count
}

// Add counts one more message and returns the Buf its owner appends it to:
// its encoding to B, the bytes it counts to Count.
func (b *Batch) Add() *Buf {
	if b.buf == nil {
		b.buf = GetBuf()
	}
	b.msgs++
	return b.buf
}

// Take empties b and returns its Buf (nil when b held nothing) and how many
// messages it held. The owner queues the Buf or returns it with PutBuf.
func (b *Batch) Take() (*Buf, int) {
	w, n := b.buf, b.msgs
	b.buf, b.msgs = nil, 0
	return w, n
}
