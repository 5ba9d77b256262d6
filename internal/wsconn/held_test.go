package wsconn_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// bufferBytes is what one borrowed buffer counts: the read buffer, or the
// buffer a message is reassembled in while it fits in one.
const bufferBytes = 64 << 10

// transports are the ways a connection reads: a plain socket waited on
// through the runtime's poller, one whose descriptor is hidden (as off Unix),
// and TLS, whose descriptor carries records, not the plaintext.
var transports = []string{"tcp", "opaque", "tls"}

// transportPair is both ends of one WebSocket connection over the named
// transport, ready for wsconn.New: the server's end, the client's.
func transportPair(t *testing.T, transport string) (srv, cli net.Conn) {
	t.Helper()
	p := newRawPair(t)
	switch transport {
	case "opaque":
		return opaqueConn{p.server}, opaqueConn{p.client}
	case "tls":
		return tlsPair(t, p.server, p.client)
	}
	return p.server, p.client
}

// tlsPair runs a TLS handshake over both ends of a connection.
func tlsPair(t *testing.T, srv, cli net.Conn) (*tls.Conn, *tls.Conn) {
	t.Helper()
	cfg, certPEM, err := upstreamtest.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	server := tls.Server(srv, cfg)
	client := tls.Client(cli, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- server.HandshakeContext(ctx) }()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TLS handshake (server): %v", err)
	}
	return server, client
}

// A message read in pieces counts the buffer it is reassembled in while it
// is read (docs/design.md "Memory"), and the connection gives it back once
// the message is handed over and the reader waits for the next: a peer that
// sends half a message and stops holds a counted 64 KiB, not an unseen one.
// The read buffer counts too while bytes wait in it, so the account never
// misses what the connection borrows, on every transport.
func TestBorrowedBuffersCount(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			const size = 1000
			acct := newAccount(t, 1<<20, 1<<20)
			srvNC, cliNC := transportPair(t, transport)
			c := wrap(t, cliNC, nil, wsconn.Options{Client: true, Account: acct})
			msgs := readLoop(t, c)

			want := pattern(3, size)
			frame := encode(t, ws.NewFrame(ws.OpBinary, true, want))
			cut := len(frame) - size/2
			writeRawBytes(t, srvNC, frame[:cut])
			awaitHeld(t, acct, bufferBytes, "half a message read")
			if got := c.Held(); got != bufferBytes {
				t.Fatalf("Held() = %d with half a message read, want %d", got, bufferBytes)
			}
			writeRawBytes(t, srvNC, frame[cut:])
			if m := recv(t, msgs); m.err != nil || !bytes.Equal(m.p, want) {
				t.Fatalf("got %d bytes, %v; want the %d-byte message", len(m.p), m.err, size)
			}
			awaitHeld(t, acct, 0, "reader waiting for the next message")

			// A message in fragments, each in its own write: the same.
			writeRawBytes(t, srvNC, encode(t, ws.NewFrame(ws.OpText, false, []byte("frag"))))
			awaitHeld(t, acct, bufferBytes, "first fragment read")
			writeRawBytes(t, srvNC, encode(t, ws.NewFrame(ws.OpContinuation, true, []byte("ment"))))
			if m := recv(t, msgs); m.err != nil || string(m.p) != "fragment" {
				t.Fatalf("got %q, %v; want \"fragment\"", m.p, m.err)
			}
			awaitHeld(t, acct, 0, "reader waiting after the fragments")
			if used := acct.Budget().Used(); used != 0 {
				t.Fatalf("the budget holds %d bytes with the connection idle, want 0", used)
			}
		})
	}
}

// A connection that ends gives back what its reader held, even while the
// reader is stuck in the middle of a message and never reads again: an
// upstream session's next connection counts on the same account.
func TestHeldBytesReturnWhenConnectionEnds(t *testing.T) {
	acct := newAccount(t, 1<<20, 1<<20)
	srvNC, cliNC := transportPair(t, "tcp")
	c := wrap(t, cliNC, nil, wsconn.Options{Client: true, Account: acct})
	msgs := readLoop(t, c)
	frame := encode(t, ws.NewFrame(ws.OpBinary, true, pattern(4, 1000)))
	writeRawBytes(t, srvNC, frame[:100])
	awaitHeld(t, acct, bufferBytes, "half a message read")
	c.Abort()
	waitDone(t, c, testTimeout)
	if got := acct.Budget().Used(); got != 0 {
		t.Fatalf("the budget holds %d bytes after the connection ended, want 0", got)
	}
	if m := recv(t, msgs); m.err == nil {
		t.Fatal("a message from a connection that was aborted in the middle of it")
	}
}

// An idle connection holds no buffer after messages read through the
// general path, on any transport: a large one (read across reads) and a
// fragmented one that fits in one buffer, which is what a connection used
// to keep for the next message. What it keeps on the heap once its reader
// waits is far below one buffer. TLS is measured beside what crypto/tls
// itself keeps: both ends exchanged full-size records before the baseline,
// so its own input buffers are already grown. Half the connections are
// servers (tether facing an app), half clients (facing the upstream), each
// fed by a raw peer.
func TestIdleConnectionHoldsNoBuffersAfterLargeMessages(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			const conns, perConnLimit, large, fragment = 40, 16 << 10, 100 << 10, 20 << 10
			type pair struct{ srv, cli net.Conn }
			raw := make([]pair, conns)
			for i := range raw {
				raw[i].srv, raw[i].cli = transportPair(t, transport)
				warmUp(t, raw[i].srv, raw[i].cli)
			}
			b, err := budget.New(budget.Options{Limit: 64 << 20, Share: 1 << 20, Sessions: conns})
			if err != nil {
				t.Fatal(err)
			}
			before := heapAfterGC()
			all := make([]*wsconn.Conn, 0, conns)
			for i, p := range raw {
				client := i%2 == 0
				nc, peer, frame := p.srv, p.cli, clientFrame
				if client {
					nc, peer, frame = p.cli, p.srv, ws.NewFrame
				}
				c := wrap(t, nc, nil, wsconn.Options{Client: client, Account: b.Open()})
				msgs := readLoop(t, c)
				writeRaw(t, peer, frame(ws.OpBinary, true, pattern(1, large)))
				if m := recv(t, msgs); m.err != nil || len(m.p) != large {
					t.Fatalf("got %d bytes, %v; want %d", len(m.p), m.err, large)
				}
				writeRaw(t, peer, frame(ws.OpBinary, false, pattern(2, fragment)), frame(ws.OpContinuation, true, pattern(3, fragment)))
				if m := recv(t, msgs); m.err != nil || len(m.p) != 2*fragment {
					t.Fatalf("got %d bytes, %v; want %d", len(m.p), m.err, 2*fragment)
				}
				all = append(all, c)
			}
			// The readers give their buffers back once they find nothing to
			// read, with no event to wait for: poll, bounded.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(testTimeout)
			for {
				perConn := (heapAfterGC() - before) / conns
				held := heldBy(all)
				if perConn < perConnLimit && held == 0 && b.Used() == 0 {
					t.Logf("%d B of heap per idle connection", perConn)
					return
				}
				select {
				case <-tick.C:
				case <-deadline:
					t.Fatalf("%d B of heap per idle connection (want < %d), %d B held, %d B on the budget (want 0)",
						perConn, perConnLimit, held, b.Used())
				}
			}
		})
	}
}

// warmUp sends enough each way, and reads it, for crypto/tls to reach
// full-size records (16 KiB, after 128 KiB of smaller ones), so that the
// input buffers it grows for them are there before a baseline.
func warmUp(t *testing.T, srv, cli net.Conn) {
	t.Helper()
	const n = 512 << 10
	for _, dir := range [][2]net.Conn{{srv, cli}, {cli, srv}} {
		errc := make(chan error, 1)
		go func(w net.Conn) {
			_, err := w.Write(make([]byte, n))
			errc <- err
		}(dir[0])
		if _, err := io.ReadFull(dir[1], make([]byte, n)); err != nil {
			t.Fatalf("warm-up read: %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("warm-up write: %v", err)
		}
	}
}

func heldBy(conns []*wsconn.Conn) int64 {
	var n int64
	for _, c := range conns {
		n += c.Held()
	}
	return n
}

// A compressed message's buffers count like a plain one's, and go back once
// the reader waits; what context takeover keeps for the next message (the
// peer's window, a decompressor) is the stream's state and stays counted
// until the connection ends, on every kind of inflation.
func TestInflationCounts(t *testing.T) {
	for _, takeover := range []bool{true, false} {
		t.Run(map[bool]string{true: "context takeover", false: "no context takeover"}[takeover], func(t *testing.T) {
			acct := newAccount(t, 1<<20, 1<<20)
			c, peer := clientSide(t, wsconn.Options{Account: acct, Deflate: &wsconn.Deflate{PeerNoContextTakeover: !takeover}})
			d := newPeerDeflater(t, takeover)
			msgs := readLoop(t, c)
			var state int64 // what stays counted between messages
			for _, size := range []int{100, 10 << 10, 200 << 10} {
				want := bytes.Repeat(feedMessage(size), size/len(feedMessage(size))+1)
				writeRaw(t, peer, compressedFrame(ws.OpText, true, d.compress(t, want)))
				if m := recv(t, msgs); m.err != nil || !bytes.Equal(m.p, want) {
					t.Fatalf("%d-byte message: got %d bytes, %v", len(want), len(m.p), m.err)
				}
				if takeover {
					state = wsconn.TakeoverBytes
				}
				awaitHeld(t, acct, state, "reader waiting after a compressed message")
			}
			c.Abort()
			waitDone(t, c, testTimeout)
			if got := acct.Budget().Used(); got != 0 {
				t.Fatalf("the budget holds %d bytes after the connection ended, want 0", got)
			}
		})
	}
}
