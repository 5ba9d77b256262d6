package wsconn_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// QueueBytes is what bounds the queue, whatever the size of the messages: a
// slow peer gets up to QueueBytes of small messages buffered before Send
// blocks, not a fixed number of frames.
func TestQueueBytesBoundsSmallMessages(t *testing.T) {
	const queueBytes, size = 256 << 10, 64
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: queueBytes})
	sent := fillUntilBlocked(t, srv, size, srv.DataQueueFull)
	if q := srv.Queued(); q > queueBytes || q < queueBytes-1024 {
		t.Fatalf("Send blocked with %d bytes queued, want close to QueueBytes %d", q, queueBytes)
	}
	if err := <-rawReader(p.client, sent); err != nil {
		t.Fatal(err)
	}
}

// A ping queued behind a backlog is written before the rest of it: it waits
// for the write in progress, not for everything queued.
func TestPingOvertakesBacklog(t *testing.T) {
	const size, queued = 16 << 10, 256 // 4 MiB: many writes' worth
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{})
	for seq := range queued {
		mustSend(t, srv, ws.OpBinary, numbered(seq, size))
	}
	if err := srv.Ping([]byte("probe")); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	br := bufio.NewReaderSize(p.client, 64<<10)
	for seq := 0; ; seq++ {
		f := mustReadFrame(t, br, false)
		if f.hdr.OpCode == ws.OpPing {
			if seq >= queued {
				t.Fatalf("ping written after all %d queued messages", queued)
			}
			t.Logf("ping written after %d of %d queued messages", seq, queued)
			return
		}
	}
}

// opaqueConn hides the socket's descriptor, as a TLS connection does: the
// connection then reads through a buffer of its own and writes only from its
// writer goroutine.
type opaqueConn struct{ net.Conn }

func TestWithoutDescriptor(t *testing.T) {
	p := newRawPair(t)
	srv := wrap(t, opaqueConn{p.server}, nil, wsconn.Options{})
	cli := wrap(t, opaqueConn{p.client}, p.clientBR, wsconn.Options{Client: true})
	for _, n := range messageSizes {
		t.Run(fmt.Sprintf("%dB", n), func(t *testing.T) {
			want := pattern(n, n)
			mustSend(t, srv, ws.OpBinary, want)
			checkMessage(t, cli, ws.OpBinary, want)
			mustSend(t, cli, ws.OpText, want)
			checkMessage(t, srv, ws.OpText, want)
		})
	}
	pongs := make(chan struct{}, 1)
	srv2, cli2 := opaquePair(t, wsconn.Options{}, wsconn.Options{Pong: func() { pongs <- struct{}{} }})
	msgs := readLoop(t, srv2)
	readLoop(t, cli2) // reads the pong
	if err := cli2.Ping(nil); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	select {
	case <-pongs:
	case m := <-msgs:
		t.Fatalf("server read %v %q, %v instead of answering the ping", m.op, m.p, m.err)
	case <-time.After(testTimeout):
		t.Fatal("no pong through opaque connections")
	}
}

func opaquePair(t *testing.T, server, client wsconn.Options) (srv, cli *wsconn.Conn) {
	t.Helper()
	p := newRawPair(t)
	server.Client, client.Client = false, true
	return wrap(t, opaqueConn{p.server}, nil, server), wrap(t, opaqueConn{p.client}, p.clientBR, client)
}

// Send after the close frame is queued fails at once, even with room in the
// queue, and the frames sent before it are all written ahead of the close.
func TestSendAfterCloseQueued(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	for i := range 10 {
		mustSend(t, srv, ws.OpText, fmt.Appendf(nil, "msg %d", i))
	}
	srv.Close(ws.StatusNormalClosure, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.Send(ctx, ws.OpText, []byte("late")); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
	for i := range 10 {
		f := mustReadFrame(t, raw, false)
		if string(f.payload) != fmt.Sprintf("msg %d", i) {
			t.Fatalf("frame %d: %v %q", i, f.hdr.OpCode, f.payload)
		}
	}
	expectClose(t, raw, false, ws.StatusNormalClosure, ptr(""))
}
