package wsconn_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// An idle connection holds no read or write buffer: after traffic, once its
// reader waits for the next frame, what a connection keeps on the heap is far
// below one buffer (64 KiB). tether keeps thousands of idle sessions, each
// with two connections.
func TestIdleConnectionHoldsNoBuffers(t *testing.T) {
	const pairs, perConnLimit = 50, 8 << 10
	before := heapAfterGC()
	for range pairs {
		srv, cli := bothSides(t, wsconn.Options{}, wsconn.Options{})
		// Traffic both ways takes buffers from the pools and gives them back.
		mustSend(t, srv, ws.OpText, pattern(1, 100))
		checkMessage(t, cli, ws.OpText, pattern(1, 100))
		mustSend(t, cli, ws.OpText, pattern(2, 100))
		checkMessage(t, srv, ws.OpText, pattern(2, 100))
		readLoop(t, srv) // the readers wait for the next frame
		readLoop(t, cli)
	}
	// The readers give their buffers back once they find nothing to read,
	// with no event to wait for: poll, bounded.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for {
		perConn := (heapAfterGC() - before) / (2 * pairs)
		if perConn < perConnLimit {
			t.Logf("%d B of heap per idle connection", perConn)
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d B of heap per idle connection, want < %d", perConn, perConnLimit)
		}
	}
}

// heapAfterGC is the live heap once the pools' contents are collected (a
// pooled buffer survives one collection in the victim cache).
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// An idle connection has no writer goroutine: the writer runs while
// something is queued (data, a ping, a pong) and exits once it has written
// it, so what remains of each pair after traffic both ways is the two
// readers the test itself runs.
func TestIdleConnectionHasNoWriter(t *testing.T) {
	const pairs = 50
	before := runtime.NumGoroutine()
	for range pairs {
		srv, cli := bothSides(t, wsconn.Options{}, wsconn.Options{})
		mustSend(t, srv, ws.OpText, pattern(1, 100))
		checkMessage(t, cli, ws.OpText, pattern(1, 100))
		mustSend(t, cli, ws.OpText, pattern(2, 100))
		checkMessage(t, srv, ws.OpText, pattern(2, 100))
		if err := cli.Ping([]byte("p")); err != nil { // the server's writer answers it
			t.Fatal(err)
		}
		readLoop(t, srv)
		readLoop(t, cli)
	}
	// A writer exits after its last write, with no event to wait for:
	// poll, bounded.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for {
		extra := runtime.NumGoroutine() - before
		if extra <= 2*pairs {
			t.Logf("%d goroutines for %d idle pairs (their test readers)", extra, pairs)
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d goroutines for %d idle pairs, want at most %d (the test's readers)", extra, pairs, 2*pairs)
		}
	}
}
