package wsconn

import "sync"

// wbuf is a run of whole encoded frames waiting to be written, pooled so the
// steady state allocates nothing and an idle connection holds no write buffer.
type wbuf struct {
	b     []byte
	data  int64 // payload bytes of data frames, reserved against QueueBytes
	close bool  // ends with the close frame
}

// segmentBytes is how many bytes of frames a segment collects before the next
// frame starts another: the unit of one write, so a ping or pong waits for at
// most one segment of backlog. A frame larger than this has a segment to itself.
const segmentBytes = 64 << 10

// maxPooledBuffer keeps one huge message from pinning its buffer in the pool.
const maxPooledBuffer = 4 * segmentBytes

// A new buffer has a segment's capacity at once, so filling it never copies
// what it already holds.
var wbufPool = sync.Pool{New: func() any { return &wbuf{b: make([]byte, 0, segmentBytes)} }}

func getWbuf() *wbuf { return wbufPool.Get().(*wbuf) }

func putWbuf(w *wbuf) {
	if cap(w.b) > maxPooledBuffer {
		return // the pool makes a segment-sized one when it runs short
	}
	w.b, w.data, w.close = w.b[:0], 0, false
	wbufPool.Put(w)
}

// rbuf is a read buffer, held by a connection only while bytes wait in it.
type rbuf struct{ b []byte }

var rbufPool = sync.Pool{New: func() any { return &rbuf{b: make([]byte, readBufferSize)} }}

func getRbuf() *rbuf  { return rbufPool.Get().(*rbuf) }
func putRbuf(b *rbuf) { rbufPool.Put(b) }
