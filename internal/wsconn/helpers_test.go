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

// testTimeout bounds every blocking step of a test: raw sockets get it as a
// deadline, so a wsconn that never answers fails the test instead of hanging it.
const testTimeout = 10 * time.Second

// rawPair is both ends of one WebSocket connection on loopback, right after the
// gobwas handshake: server accepted with ws.Upgrader, client dialed with ws.Dialer.
type rawPair struct {
	server   net.Conn
	client   net.Conn
	clientBR *bufio.Reader // what Dial buffered after the 101; nil when nothing
}

type accepted struct {
	conn net.Conn
	err  error
}

// newRawPair handshakes a fresh connection. Tests (not benchmarks) get testTimeout
// as a deadline on both sockets.
func newRawPair(tb testing.TB) rawPair {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	ch := make(chan accepted, 1)
	go acceptUpgrade(ln, ch)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client, br, _, dialErr := ws.Dialer{}.Dial(ctx, "ws://"+ln.Addr().String()+"/")
	_ = ln.Close() // unblocks Accept if Dial failed before connecting
	a := <-ch
	if dialErr != nil || a.err != nil {
		closeIf(client)
		closeIf(a.conn)
		tb.Fatalf("handshake: dial %v, upgrade %v", dialErr, a.err)
	}
	tb.Cleanup(func() {
		_ = client.Close()
		_ = a.conn.Close()
	})
	if _, bench := tb.(*testing.B); !bench {
		deadline := time.Now().Add(testTimeout)
		_ = client.SetDeadline(deadline)
		_ = a.conn.SetDeadline(deadline)
	}
	return rawPair{server: a.conn, client: client, clientBR: br}
}

func acceptUpgrade(ln net.Listener, ch chan<- accepted) {
	conn, err := ln.Accept()
	if err != nil {
		ch <- accepted{err: err}
		return
	}
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := (ws.Upgrader{}).Upgrade(conn); err != nil {
		_ = conn.Close()
		ch <- accepted{err: err}
		return
	}
	_ = conn.SetDeadline(time.Time{})
	ch <- accepted{conn: conn}
}

func closeIf(c net.Conn) {
	if c != nil {
		_ = c.Close()
	}
}

// wrap makes a wsconn.Conn that the test's cleanup aborts and waits for, so its
// writer goroutine never outlives the test.
func wrap(tb testing.TB, nc net.Conn, br *bufio.Reader, opts wsconn.Options) *wsconn.Conn {
	tb.Helper()
	c := wsconn.New(nc, br, opts)
	tb.Cleanup(func() {
		c.Abort()
		<-c.Done()
	})
	return c
}

// serverSide is a wsconn server (tether facing an app) with a raw gobwas client.
func serverSide(tb testing.TB, opts wsconn.Options) (*wsconn.Conn, net.Conn) {
	tb.Helper()
	p := newRawPair(tb)
	opts.Client = false
	return wrap(tb, p.server, nil, opts), p.client
}

// clientSide is a wsconn client (tether facing upstream) with a raw gobwas server.
func clientSide(tb testing.TB, opts wsconn.Options) (*wsconn.Conn, net.Conn) {
	tb.Helper()
	p := newRawPair(tb)
	opts.Client = true
	return wrap(tb, p.client, p.clientBR, opts), p.server
}

// bothSides wraps both ends of one connection.
func bothSides(tb testing.TB, server, client wsconn.Options) (srv, cli *wsconn.Conn) {
	tb.Helper()
	p := newRawPair(tb)
	server.Client, client.Client = false, true
	return wrap(tb, p.server, nil, server), wrap(tb, p.client, p.clientBR, client)
}

// clientFrame is what a well-behaved client puts on the wire: masked.
func clientFrame(op ws.OpCode, fin bool, p []byte) ws.Frame {
	return ws.MaskFrame(ws.NewFrame(op, fin, p))
}

func encode(tb testing.TB, frames ...ws.Frame) []byte {
	tb.Helper()
	var b bytes.Buffer
	for _, f := range frames {
		if err := ws.WriteFrame(&b, f); err != nil {
			tb.Fatalf("encode frame: %v", err)
		}
	}
	return b.Bytes()
}

// writeRaw sends frames as one write, so the reader sees them back to back.
func writeRaw(tb testing.TB, w io.Writer, frames ...ws.Frame) {
	tb.Helper()
	if _, err := w.Write(encode(tb, frames...)); err != nil {
		tb.Fatalf("write raw frames: %v", err)
	}
}

func closeBody(code ws.StatusCode, reason string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(code))
	return append(b, reason...)
}

// rawFrame is one frame as read off the wire by a raw peer, payload unmasked.
type rawFrame struct {
	hdr     ws.Header
	payload []byte
}

func readFrame(r io.Reader) (rawFrame, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return rawFrame{}, fmt.Errorf("read header: %w", err)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return rawFrame{}, fmt.Errorf("read payload: %w", err)
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	return rawFrame{hdr: h, payload: p}, nil
}

// mustReadFrame reads one frame and checks that its masking matches the side that
// wrote it (RFC 6455 §5.1).
func mustReadFrame(tb testing.TB, r io.Reader, wantMasked bool) rawFrame {
	tb.Helper()
	f, err := readFrame(r)
	if err != nil {
		tb.Fatalf("raw peer: %v", err)
	}
	if f.hdr.Masked != wantMasked {
		tb.Fatalf("frame %v masked=%v, want %v", f.hdr.OpCode, f.hdr.Masked, wantMasked)
	}
	if !f.hdr.Fin || f.hdr.Rsv != 0 {
		tb.Fatalf("frame %v: fin=%v rsv=%d, want a single final frame", f.hdr.OpCode, f.hdr.Fin, f.hdr.Rsv)
	}
	return f
}

// expectClose reads frames until a close frame and checks its code (and reason,
// when wantReason is not nil).
func expectClose(tb testing.TB, r io.Reader, wantMasked bool, wantCode ws.StatusCode, wantReason *string) {
	tb.Helper()
	for {
		f := mustReadFrame(tb, r, wantMasked)
		if f.hdr.OpCode != ws.OpClose {
			continue
		}
		code, reason := ws.ParseCloseFrameData(f.payload)
		if code != wantCode {
			tb.Fatalf("close code %d (reason %q), want %d", code, reason, wantCode)
		}
		if wantReason != nil && reason != *wantReason {
			tb.Fatalf("close reason %q, want %q", reason, *wantReason)
		}
		return
	}
}

func ptr[T any](v T) *T { return &v }

// message is one ReadMessage result with its payload copied.
type message struct {
	op  ws.OpCode
	p   []byte
	err error
}

// readLoop reads c until ReadMessage fails, delivering every result (the error
// last) on the returned channel. Its goroutine ends at the test's cleanup.
func readLoop(tb testing.TB, c *wsconn.Conn) <-chan message {
	out := make(chan message)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			op, p, err := c.ReadMessage()
			m := message{op: op, p: bytes.Clone(p), err: err}
			select {
			case out <- m:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tb.Cleanup(func() {
		close(stop)
		c.Abort()
		wg.Wait()
	})
	return out
}

// recv waits for the next result of a readLoop.
func recv(tb testing.TB, ch <-chan message) message {
	tb.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			tb.Fatal("reader stopped")
		}
		return m
	case <-time.After(testTimeout):
		tb.Fatal("no message within the test timeout")
	}
	return message{}
}

func mustRead(tb testing.TB, c *wsconn.Conn) (ws.OpCode, []byte) {
	tb.Helper()
	op, p, err := c.ReadMessage()
	if err != nil {
		tb.Fatalf("ReadMessage: %v", err)
	}
	return op, p
}

func mustSend(tb testing.TB, c *wsconn.Conn, op ws.OpCode, p []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.Send(ctx, op, p); err != nil {
		tb.Fatalf("Send: %v", err)
	}
}

// waitDone waits for c.Done within bound and returns how long it took.
func waitDone(tb testing.TB, c *wsconn.Conn, bound time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	select {
	case <-c.Done():
		return time.Since(start)
	case <-time.After(bound):
		tb.Fatalf("Done not closed within %v", bound)
	}
	return 0
}

func asProtocolError(tb testing.TB, err error, want ws.StatusCode) *wsconn.ProtocolError {
	tb.Helper()
	var pe *wsconn.ProtocolError
	if !errors.As(err, &pe) {
		tb.Fatalf("error %v (%T), want *ProtocolError %d", err, err, want)
	}
	if pe.Code != want {
		tb.Fatalf("protocol error code %d (%s), want %d", pe.Code, pe.Reason, want)
	}
	return pe
}

func asCloseError(tb testing.TB, err error) *wsconn.CloseError {
	tb.Helper()
	var ce *wsconn.CloseError
	if !errors.As(err, &ce) {
		tb.Fatalf("error %v (%T), want *CloseError", err, err)
	}
	return ce
}

// pattern fills n bytes derived from seed, so a torn or mixed message is caught.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (seed+i)%26)
	}
	return b
}
