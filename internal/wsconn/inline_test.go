//go:build unix

package wsconn_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// goroutinesCreated returns a reader of the runtime's count of goroutines
// created since the program started; the test is skipped where the runtime
// does not count them.
func goroutinesCreated(t *testing.T) func() uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Skip("this runtime does not count the goroutines it creates")
	}
	return func() uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
}

// A burst that finds the writer idle is written by the goroutine that
// queued it, as nginx writes on the thread that read: when Send, SendBatch
// or Ping returns, the frame is in the kernel (nothing counted as queued)
// and no goroutine was started for it. A writer goroutine started per
// burst cost a thread wake-up per burst (issue 17's profile). Each round is
// a burst of its own: the peer reads the frame before the next is queued.
func TestBurstWrittenInline(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		srv, peer := serverSide(t, wsconn.Options{})
		burstsWrittenInline(t, srv, peer)
	})
	// An app on a unix socket (TETHER_LISTEN=unix:...) is a WebSocket
	// Conn on a *net.UnixConn: written inline the same way.
	t.Run("unix", func(t *testing.T) {
		a, b := unixPair(t)
		burstsWrittenInline(t, wrap(t, a, nil, wsconn.Options{}), b)
	})
}

// unixPair returns both ends of a connected unix stream socket.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		nc, err := net.FileConn(f) // a copy of the descriptor
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = nc.(*net.UnixConn)
		_ = nc.SetDeadline(time.Now().Add(testTimeout))
		t.Cleanup(func() { _ = nc.Close() })
	}
	return conns[0], conns[1]
}

func burstsWrittenInline(t *testing.T, srv *wsconn.Conn, peer net.Conn) {
	const rounds = 90
	created := goroutinesCreated(t)
	runtime.GC() // the collector's workers start with its first cycle: before the count
	before := created()
	for i := range rounds {
		want := pattern(i, 1<<10)
		op := ws.OpBinary
		switch i % 3 {
		case 0:
			mustSend(t, srv, op, want)
		case 1:
			var b sendq.Batch
			srv.Append(&b, op, want)
			if _, err := srv.SendBatch(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
		case 2:
			op, want = ws.OpPing, want[:125]
			if err := srv.Ping(want); err != nil {
				t.Fatal(err)
			}
		}
		if q := srv.Queued(); q != 0 {
			t.Fatalf("round %d: %d bytes still queued when the call returned, want them written by it", i, q)
		}
		f := mustReadFrame(t, peer, false)
		if f.hdr.OpCode != op || !bytes.Equal(f.payload, want) {
			t.Fatalf("round %d: got op %v, %d bytes; want op %v, %d bytes", i, f.hdr.OpCode, len(f.payload), op, len(want))
		}
	}
	// None is expected; the runtime may start one or two of its own (a
	// collection's cleanups) meanwhile, nothing like one per burst.
	if n := created() - before; n > rounds/10 {
		t.Fatalf("%d goroutines started for %d bursts, want none: each burst should be written by its caller", n, rounds)
	}
}

// A peer that stops reading: the inline write takes what the socket has
// room for and returns, never waiting for the peer, and the rest (the
// remainder of a frame cut by a partial write, the frames behind it, a
// ping queued meanwhile) goes out through the writer goroutine once the
// peer reads again: whole frames, data in order, the ping between two of
// them, and the queue's count, and the budget's, back to zero.
func TestInlineLeavesRestToWriter(t *testing.T) {
	acct := newAccount(t, 64<<20, 16<<20)
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: 8 << 20, Account: acct})
	// The socket buffers take some hundreds of KiB with the peer not
	// reading (a small send buffer; the peer's receive buffer is left as
	// it is: one set small stalls TCP on zero-window probes, 200 ms and
	// more each): these sizes leave most of them to the writer goroutine. A
	// Send that waited for the peer would wait for ever here (the test's
	// goroutine is the peer), and fail at the sockets' deadline.
	msgs := [][]byte{pattern(1, 1<<20), pattern(2, 100), pattern(3, 300<<10)}
	for i, m := range msgs {
		mustSend(t, srv, ws.OpBinary, m)
		if i == 0 {
			if err := srv.Ping([]byte("behind")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if q := srv.Queued(); q == 0 {
		t.Fatal("nothing queued behind a peer that does not read: the sizes no longer test a partial write")
	}
	pings := 0
	for i := 0; i < len(msgs); {
		f := mustReadFrame(t, p.client, false)
		if f.hdr.OpCode == ws.OpPing {
			if pings++; pings > 1 || !bytes.Equal(f.payload, []byte("behind")) {
				t.Fatalf("ping %d with payload %q, want one with \"behind\"", pings, f.payload)
			}
			continue
		}
		if f.hdr.OpCode != ws.OpBinary || !bytes.Equal(f.payload, msgs[i]) {
			t.Fatalf("message %d: got op %v, %d bytes; want binary, %d bytes (equal=%v)", i, f.hdr.OpCode, len(f.payload), len(msgs[i]), bytes.Equal(f.payload, msgs[i]))
		}
		i++
	}
	if pings != 1 {
		t.Fatalf("%d pings read, want 1", pings)
	}
	waitFor(t, "the queue's count back to zero", func() bool { return srv.Queued() == 0 })
	if held := acct.Held(); held != 0 {
		t.Fatalf("the account holds %d bytes with everything written, want 0", held)
	}
	if err := srv.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
}

// choppyReader reads at most a few KiB at a time, a varying amount: a peer
// slower than the writer, so that inline writes keep meeting a full socket
// (the small send buffer) and leave the rest to the goroutine at every kind
// of boundary.
type choppyReader struct {
	r   io.Reader
	rnd *rand.Rand
}

func (c choppyReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), 1+c.rnd.IntN(4<<10))])
}

// Messages of every size from one goroutine, batches and pings from others
// meanwhile, to a peer that reads in small uneven pieces behind small
// socket buffers: whoever writes (the caller inline, the goroutine after a
// partial write), every frame arrives whole, the data messages in order,
// the pings whole between them, and the queue and the budget end at zero.
func TestInlineWritesInOrder(t *testing.T) {
	const msgs, pings = 200, 50
	created := goroutinesCreated(t)
	acct := newAccount(t, 64<<20, 1<<20)
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: 256 << 10, Account: acct})
	size := func(i int) int { return 1 + (i*7919)%(32<<10) }
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errs := make(chan error, 2)
	before := created()
	go func() { // data: one message at a time, or a batch of three
		for i := 0; i < msgs; {
			if i%5 == 4 && i+3 <= msgs {
				var b sendq.Batch
				for j := i; j < i+3; j++ {
					srv.Append(&b, ws.OpBinary, numbered(j, max(8, size(j))))
				}
				if _, err := srv.SendBatch(ctx, &b); err != nil {
					errs <- err
					return
				}
				i += 3
				continue
			}
			if err := srv.Send(ctx, ws.OpBinary, numbered(i, max(8, size(i)))); err != nil {
				errs <- err
				return
			}
			i++
		}
		errs <- nil
	}()
	go func() { // the heartbeat
		for i := range pings {
			if err := srv.Ping([]byte(fmt.Sprintf("ping %d", i))); err != nil {
				errs <- err
				return
			}
			runtime.Gosched()
		}
		errs <- nil
	}()
	r := choppyReader{r: p.client, rnd: rand.New(rand.NewPCG(1, 2))}
	seen := 0
	for next := 0; next < msgs; {
		f := mustReadFrame(t, r, false)
		switch f.hdr.OpCode {
		case ws.OpPing:
			// Pings may be dropped (at most four wait), never torn.
			if !strings.HasPrefix(string(f.payload), "ping ") {
				t.Fatalf("ping payload %q", f.payload)
			}
			seen++
		case ws.OpBinary:
			if want := numbered(next, max(8, size(next))); !bytes.Equal(f.payload, want) {
				t.Fatalf("message %d: %d bytes, want %d (equal=%v)", next, len(f.payload), len(want), bytes.Equal(f.payload, want))
			}
			next++
		default:
			t.Fatalf("frame with op %v", f.hdr.OpCode)
		}
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the queue's count back to zero", func() bool { return srv.Queued() == 0 })
	if held := acct.Held(); held != 0 {
		t.Fatalf("the account holds %d bytes with everything written, want 0", held)
	}
	// Two are the test's own; the rest, writer goroutines taking over
	// from an inline write.
	starts := created() - before - 2
	if starts == 0 {
		t.Fatal("no writer goroutine took over: the sizes no longer test partial writes")
	}
	t.Logf("%d pings of %d read between the messages; %d writer goroutine starts", seen, pings, starts)
}
