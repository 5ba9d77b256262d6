package upstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Backlog tests: tether writes far more than the upstream reads at once, so
// the probe waits behind megabytes in the write queue and the kernel's
// socket buffers, and its answer comes late however healthy the upstream.
const (
	backlogMessages = 350
	backlogSize     = 32 << 10 // 11 MiB in all: beyond the kernel's socket buffers
)

// sendBacklog is a Restore that queues the backlog, numbered.
func sendBacklog(ctx context.Context, c *upstream.Conn) error {
	msg := make([]byte, backlogSize)
	for i := range backlogMessages {
		msg[0], msg[1] = byte(i>>8), byte(i)
		if err := c.Send(ctx, 2, msg); err != nil { // binary
			return err
		}
	}
	return nil
}

// TestSlowReaderNotDead: an upstream that reads one message every 4 ms (8
// MB/s at most, a hundredth of what tether writes on loopback) takes
// seconds to reach the probes queued behind the backlog, and sends nothing
// meanwhile, with PingTimeout 500 ms. The window it opens as it reads lets
// tether's bytes through, acknowledged, which proves it reading: the
// connection is not declared dead, and every message arrives on it.
//
// The server reads a message only when it handles it, into a 256 KiB
// receive buffer: TCP reports a reader's progress in steps of a segment
// (64 KiB on loopback) or of a sixteenth of its receive buffer (Linux), and
// a step must come within PingTimeout for the reader to be seen reading
// (docs/design.md "Dead detection"). The server shares the CPU with tether:
// at load 30 on 2 cores its goroutines went 100 ms without running while
// tether's heartbeat woke on time, which to tether is a peer that stopped
// reading. PingTimeout is 500 ms here, not the package's 100 ms, for that
// reason; the probes still wait behind more than that (without write
// progress the connection is declared dead after about a second).
//
// The test waits on the server's reads, each within waitLimit of the one
// before, not on the whole backlog within a time: how fast a CPU-starved
// server gets through it is the scheduler's business, and a connection
// declared dead meanwhile is what fails the test.
func TestSlowReaderNotDead(t *testing.T) {
	const pace, slowReaderTimeout = 4 * time.Millisecond, 500 * time.Millisecond
	read := make(chan struct{}, backlogMessages) // one per message read
	received := make(chan int, 1)                // how many, once the server stops
	srv := newServer(t, upstreamtest.Options{InboxMessages: 1, ReceiveBuffer: 256 << 10,
		OnConn: func(c *upstreamtest.Conn) {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			n := 0
			for ; n < backlogMessages; n++ {
				if _, _, err := c.Read(c.Context()); err != nil {
					break
				}
				select {
				case read <- struct{}{}:
				case <-c.Context().Done():
				}
				select {
				case <-tick.C:
				case <-c.Context().Done():
				}
			}
			received <- n
			holdOpen(c)
		}})
	h := newHandler()
	h.restore = sendBacklog
	opts := heartbeatOptions(t, srv.URL(), h)
	opts.PingInterval, opts.PingTimeout = slowReaderTimeout, slowReaderTimeout
	startClient(t, opts)

	for reads := 0; ; {
		select {
		case <-read:
			reads++
			continue
		case n := <-received:
			if n != backlogMessages {
				t.Fatalf("the upstream read %d messages, want %d", n, backlogMessages)
			}
		case lost := <-h.losts:
			t.Fatalf("Lost(gen %d, %v) while the upstream was reading the backlog (%d messages read)", lost.gen, lost.err, reads)
		case <-time.After(waitLimit):
			t.Fatalf("the upstream read no message for %v after %d", waitLimit, reads)
		}
		break
	}
	if lost, ok := pending(h.losts); ok {
		t.Errorf("Lost(gen %d, %v) while the upstream was reading the backlog", lost.gen, lost.err)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
}

// TestBlackholeUnderBacklog: the same backlog, and the path goes dark while
// it is being written: nothing is acknowledged any more, so the connection
// is declared dead within the bound, counted from the blackhole (its
// buffers fill at memory speed), the write progress before it
// notwithstanding.
func TestBlackholeUnderBacklog(t *testing.T) {
	first := make(chan struct{}, 1)
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		for {
			if _, _, err := c.Read(c.Context()); err != nil {
				return
			}
			select {
			case first <- struct{}{}:
			default:
			}
		}
	}})
	proxy, err := upstreamtest.NewFaultProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	h := newHandler()
	h.restore = sendBacklog
	startClient(t, heartbeatOptions(t, proxy.URL(), h))

	recv(t, first, "the backlog's first message at the server")
	proxy.Blackhole(true)
	dark := time.Now()
	lost := h.nextLost(t)
	if !errors.Is(lost.err, upstream.ErrHeartbeatTimeout) {
		t.Fatalf("Lost(gen %d, %v), want ErrHeartbeatTimeout", lost.gen, lost.err)
	}
	took, bound := lost.at.Sub(dark), pingInterval+pingTimeout
	t.Logf("blackhole under a backlog detected %v after it began (PingInterval + PingTimeout = %v)", took, bound)
	if took > bound+slack {
		t.Errorf("detected after %v, want within %v", took, bound+slack)
	}
	proxy.Blackhole(false)
}
