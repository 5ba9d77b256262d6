package wsconn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// blockedAfter is how long a Send may wait before fillUntilBlocked concludes the
// queue is full. A Send that is merely slow only makes the fill stop early; the
// tests then check delivery, which does not depend on where it stopped.
const blockedAfter = 100 * time.Millisecond

// fillLimit bounds how much fillUntilBlocked writes before giving up: with the
// socket buffers shrunk, loopback absorbs far less than this.
const fillLimit = 64 << 20

// shrinkSendBuffer makes tether's kernel hold little of what it writes, so a peer
// that stops reading blocks the writer after a few hundred KiB instead of
// megabytes. Measured on loopback: 4 KiB makes the fill crawl on delayed ACKs,
// and shrinking the peer's receive buffer too makes the drain crawl on the
// zero-window persist timer (seconds) once the peer reads again.
func shrinkSendBuffer(tb testing.TB, c net.Conn) {
	tb.Helper()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		tb.Fatalf("%T is not a *net.TCPConn", c)
	}
	if err := tc.SetWriteBuffer(16 << 10); err != nil {
		tb.Fatalf("SetWriteBuffer: %v", err)
	}
}

// stalledConn is a real connection whose writes wait until resume, as if
// the peer had stopped reading and no socket buffer took anything first: a
// writer blocked on it stays blocked however the machine schedules it. A
// peer that merely stops reading cannot promise that: its socket buffers
// take the writer's bytes at the pace the writer runs, so under load a Send
// can wait blockedAfter for a writer that was only starved, while there was
// room. Close ends a write that waits.
type stalledConn struct {
	net.Conn
	resumed    chan struct{}
	closed     chan struct{}
	resumeOnce sync.Once
	closeOnce  sync.Once
}

func stallWrites(c net.Conn) *stalledConn {
	return &stalledConn{Conn: c, resumed: make(chan struct{}), closed: make(chan struct{})}
}

func (s *stalledConn) Write(p []byte) (int, error) {
	select {
	case <-s.resumed:
	case <-s.closed:
		return 0, net.ErrClosed
	}
	return s.Conn.Write(p)
}

// resume lets writes through from now on.
func (s *stalledConn) resume() { s.resumeOnce.Do(func() { close(s.resumed) }) }

func (s *stalledConn) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.Conn.Close()
}

// numbered is message seq: its number, then bytes derived from it.
func numbered(seq, size int) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, size), uint64(seq))
	return append(b, pattern(seq, size-8)...)
}

// fillUntilBlocked sends numbered messages until one Send stays blocked for
// blockedAfter, checks that it failed with the context's error, and returns how
// many were accepted. A Send that failed is retried with the same number while
// full (when not nil) says the backlog is not yet as large as the test needs:
// the kernel can stall the writer for a while without being full.
func fillUntilBlocked(tb testing.TB, c *wsconn.Conn, size int, full func() bool) int {
	tb.Helper()
	start := time.Now()
	for seq := 0; seq*size < fillLimit && time.Since(start) < testTimeout; {
		ctx, cancel := context.WithTimeout(context.Background(), blockedAfter)
		err := c.Send(ctx, ws.OpBinary, numbered(seq, size))
		cancel()
		switch {
		case err == nil:
			seq++
		case !errors.Is(err, context.DeadlineExceeded):
			tb.Fatalf("Send %d: %v, want nil or context.DeadlineExceeded", seq, err)
		case full == nil || full():
			tb.Logf("Send blocked after %d messages (%d KiB) in %v", seq, seq*size>>10, time.Since(start))
			return seq
		}
	}
	tb.Fatalf("Send never blocked (for good) within %d MiB and %v with a peer that does not read", fillLimit>>20, testTimeout)
	return 0
}

func TestBackpressure(t *testing.T) {
	const queueBytes, size, more = 1 << 10, 256, 200
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: queueBytes})

	sent := fillUntilBlocked(t, srv, size, nil)
	if q := srv.Queued(); q > queueBytes {
		t.Fatalf("Queued() = %d, beyond QueueBytes %d", q, queueBytes)
	}

	// The peer starts reading; the writer drains and the Sends proceed.
	got := rawReader(p.client, sent+more)
	for seq := sent; seq < sent+more; seq++ {
		mustSend(t, srv, ws.OpBinary, numbered(seq, size))
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// rawReader reads n numbered messages in order on its own goroutine and reports
// the first discrepancy (or nil) on the returned channel.
func rawReader(r io.Reader, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- readNumbered(bufio.NewReaderSize(r, 64<<10), n)
	}()
	return done
}

func readNumbered(r io.Reader, n int) error {
	for seq := range n {
		f, err := readFrame(r)
		if err != nil {
			return fmt.Errorf("message %d: %w", seq, err)
		}
		if f.hdr.OpCode != ws.OpBinary || len(f.payload) < 8 {
			return fmt.Errorf("message %d: op %v with %d bytes", seq, f.hdr.OpCode, len(f.payload))
		}
		if got := binary.BigEndian.Uint64(f.payload); got != uint64(seq) {
			return fmt.Errorf("got message %d, want %d", got, seq)
		}
		if !bytes.Equal(f.payload, numbered(seq, len(f.payload))) {
			return fmt.Errorf("message %d corrupted", seq)
		}
	}
	return nil
}

// Close with a backlog of queued frames (the data queue full, the peer slow):
// the backlog is still written, then the close frame.
//
// The queue is 64 KiB, not DefaultQueueBytes: filling 16 MiB with 64-byte
// frames took over 260,000 Sends and as many frames read back, 7 to 9 s
// under -race at load 10, past the testTimeout deadline newRawPair puts on
// both sockets. A full queue is what the test needs, not a large one.
func TestCloseAfterBacklog(t *testing.T) {
	const queueBytes, size = 64 << 10, 64
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: queueBytes, CloseWait: testTimeout})
	sent := fillUntilBlocked(t, srv, size, srv.DataQueueFull)
	srv.Close(ws.StatusGoingAway, "drain")
	br := bufio.NewReaderSize(p.client, 64<<10)
	if err := readNumbered(br, sent); err != nil {
		t.Fatal(err)
	}
	expectClose(t, br, false, ws.StatusGoingAway, ptr("drain"))
}

// With WriteTimeout set, a peer that stops reading fails the writer once a flush
// has been stuck that long: Err says why, Done closes, Send reports ErrClosed.
func TestWriteTimeout(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: 1 << 10, WriteTimeout: writeTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var err error
	for seq := 0; err == nil && seq*256 < fillLimit; seq++ {
		err = srv.Send(ctx, ws.OpBinary, numbered(seq, 256))
	}
	if !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Send: %v, want ErrClosed once the write timed out", err)
	}
	waitDone(t, srv, testTimeout)
	var ne net.Error
	if werr := srv.Err(); !errors.As(werr, &ne) || !ne.Timeout() {
		t.Fatalf("Err() = %v, want a write timeout", werr)
	}
}
