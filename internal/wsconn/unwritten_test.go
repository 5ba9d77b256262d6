package wsconn_test

import (
	"bufio"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// stalledTCP is a stalledConn that still shows the kernel its socket, as a
// writer that has not run does: the kernel's send queue stays empty while
// frames wait in the Conn's.
type stalledTCP struct {
	*stalledConn
	tc *net.TCPConn
}

func (s stalledTCP) SyscallConn() (syscall.RawConn, error) { return s.tc.SyscallConn() }

// Unwritten reports frames waiting in the queue while the kernel's send
// queue is empty: not before anything is queued; a message, or a ping, that
// the writer has not written yet; no more once it wrote them and the peer
// took them in.
func TestUnwritten(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Unwritten asks the kernel (SIOCOUTQ) on Linux only: elsewhere it reports false")
	}
	for _, what := range []string{"message", "ping"} {
		t.Run(what, func(t *testing.T) {
			p := newRawPair(t)
			tc, ok := p.server.(*net.TCPConn)
			if !ok {
				t.Fatalf("%T is not a *net.TCPConn", p.server)
			}
			stalled := stallWrites(tc)
			srv := wrap(t, stalledTCP{stalledConn: stalled, tc: tc}, nil, wsconn.Options{CloseWait: testTimeout})
			if srv.Unwritten() {
				t.Fatal("Unwritten() with nothing queued")
			}
			if what == "ping" {
				if err := srv.Ping([]byte("probe")); err != nil {
					t.Fatal(err)
				}
			} else {
				mustSend(t, srv, ws.OpBinary, pattern(1, 4<<10))
			}
			if !srv.Unwritten() {
				t.Fatalf("Unwritten() false with a %s queued and the writer held before the kernel", what)
			}
			done := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, bufio.NewReader(p.client)); done <- err }()
			stalled.resume()
			waitFor(t, "the "+what+" written and acknowledged", func() bool { return !srv.Unwritten() && srv.Queued() == 0 })
			srv.Abort()
			<-srv.Done()
			_ = p.client.Close()
			<-done
		})
	}
}

// A writer held back by its peer is not behind: with a backlog the peer
// does not read, frames wait in the queue and bytes in the kernel's.
func TestUnwrittenBacklog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Unwritten asks the kernel (SIOCOUTQ) on Linux only: elsewhere it reports false")
	}
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{CloseWait: testTimeout, QueueBytes: 256 << 10})
	fillUntilBlocked(t, srv, 64<<10, srv.DataQueueFull) // the peer reads nothing
	if srv.Unwritten() {
		t.Fatalf("Unwritten() with %d bytes queued behind a peer that does not read", srv.Queued())
	}
	if err := srv.Ping([]byte("probe")); err != nil {
		t.Fatal(err)
	}
	if srv.Unwritten() {
		t.Fatal("Unwritten() with a ping queued behind a peer that does not read")
	}
}
