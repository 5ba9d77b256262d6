package wsconn_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// WriteProgress follows what the peer takes in: a peer that does not read
// leaves a backlog whose acknowledged count stands still, however long,
// once its window has closed; once it reads, the count rises with what it
// reads and the backlog drains. (Elsewhere than Linux WriteProgress
// reports ok false: there is no TCP_INFO to read.)
func TestWriteProgress(t *testing.T) {
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{CloseWait: testTimeout, QueueBytes: 256 << 10})
	if _, _, ok := srv.WriteProgress(); !ok {
		t.Fatal("WriteProgress on a TCP socket: ok false")
	}
	fillUntilBlocked(t, srv, 64<<10, srv.DataQueueFull) // the peer reads nothing
	// The queue filling up says the writer blocked, not that the window
	// closed: the kernel sends the window's last bytes, smaller than a
	// segment, a while later (under load, after the count was taken: it
	// moved by those 15 KiB), and a starved writer may not have written
	// past the window yet. Both end in a closed window with bytes waiting.
	waitFor(t, "the peer's window closed with bytes waiting", func() bool {
		_, backlog, _ := srv.WriteProgress()
		return backlog && peerWindow(t, p.server) == 0
	})
	first, _, _ := srv.WriteProgress()
	// Nothing read, nothing acknowledged: a window of ten probes' worth.
	for range 10 {
		waitTick(t)
		if acked, _, _ := srv.WriteProgress(); acked != first {
			t.Fatalf("acknowledged count moved from %d to %d with the peer not reading", first, acked)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, bufio.NewReader(p.client)); done <- err }()
	deadline := time.Now().Add(testTimeout)
	for {
		acked, backlog, _ := srv.WriteProgress()
		if acked > first && !backlog && srv.Queued() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged %d (from %d), backlog %v, queued %d after the peer read for %v",
				acked, first, backlog, srv.Queued(), testTimeout)
		}
		waitTick(t)
	}
	srv.Abort()
	<-srv.Done()
	_ = p.client.Close()
	<-done
}

// waitTick is the interval between two looks at a counter kept by the
// kernel, which has no event to wait on.
func waitTick(t *testing.T) {
	t.Helper()
	tm := time.NewTimer(5 * time.Millisecond)
	defer tm.Stop()
	<-tm.C
}

// peerWindow is the receive window the peer last advertised to nc's socket
// (TCP_INFO tcpi_snd_wnd, Linux 5.4).
func peerWindow(t *testing.T, nc net.Conn) uint32 {
	t.Helper()
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		t.Fatalf("%T is not a *net.TCPConn", nc)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		t.Fatalf("TCP_INFO: %v, %v", cerr, err)
	}
	return info.Snd_wnd
}
