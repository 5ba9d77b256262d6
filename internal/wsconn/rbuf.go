package wsconn

import "sync"

// rbuf is a read buffer, held by a connection only while bytes wait in it.
type rbuf struct{ b []byte }

var rbufPool = sync.Pool{New: func() any { return &rbuf{b: make([]byte, readBufferSize)} }}

func getRbuf() *rbuf  { return rbufPool.Get().(*rbuf) }
func putRbuf(b *rbuf) { rbufPool.Put(b) }
