package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/goleak"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

func TestNewRequiresURLAndHandler(t *testing.T) {
	if _, err := upstream.New(upstream.Options{Handler: newHandler()}); err == nil {
		t.Error("New without URL: no error")
	}
	if _, err := upstream.New(upstream.Options{URL: "ws://127.0.0.1:1/"}); err == nil {
		t.Error("New without Handler: no error")
	}
}

// TestConnectMessagesFlow: Restore's messages reach the server, the server's
// reach Message with their opcode, First reports the subprotocol the server
// chose, and a frame the server pushed in the same segment as its 101 answer
// is not lost (frames buffered by gobwas' handshake reader, GOBWAS.md).
func TestConnectMessagesFlow(t *testing.T) {
	hs := newHandshakeLog()
	srv := newServer(t, upstreamtest.Options{
		Handshake:    hs.handshake,
		Subprotocols: []string{"v1"},
		Greeting:     "welcome",
	}) // OnConn nil: echo
	h := newHandler()
	h.restore = func(ctx context.Context, c *upstream.Conn) error {
		if err := c.SendText(ctx, []byte("subscribe")); err != nil {
			return err
		}
		return c.Send(ctx, ws.OpBinary, []byte{0, 1, 2})
	}
	opts := testOptions(t, srv.URL(), h)
	opts.Protocols = []string{"v2", "v1"}
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	if first.Err != nil || first.Permanent || first.Protocol != "v1" {
		t.Fatalf("First() = %+v, want protocol v1, no error", first)
	}
	r := h.nextRestore(t)
	if r.gen != 1 || r.conn.Protocol() != "v1" {
		t.Errorf("Restore on gen %d protocol %q, want gen 1 protocol v1", r.gen, r.conn.Protocol())
	}
	if got := hs.offered(0); !slices.Equal(got, opts.Protocols) {
		t.Errorf("client offered %q, want the app's %q in order", got, opts.Protocols)
	}
	want := []event{
		{gen: 1, op: ws.OpText, data: "welcome"},
		{gen: 1, op: ws.OpText, data: "subscribe"},
		{gen: 1, op: ws.OpBinary, data: "\x00\x01\x02"},
	}
	for _, w := range want {
		m := h.nextMessage(t)
		if m.gen != w.gen || m.op != w.op || m.data != w.data {
			t.Errorf("Message(gen %d, %v, %q), want (gen %d, %v, %q)", m.gen, m.op, m.data, w.gen, w.op, w.data)
		}
	}
	if st := c.State(); st != upstream.StateOpen {
		t.Errorf("State() = %v, want open (StableAfter not reached, no Confirm)", st)
	}
}

// TestRestoreFailureReconnects: an error from Restore fails the attempt: the
// connection is closed, Lost reports the error, the next connection is tried.
func TestRestoreFailureReconnects(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	errRestore := errors.New("restore refused")
	h := newHandler()
	h.restore = func(ctx context.Context, c *upstream.Conn) error {
		if c.Gen() == 1 {
			return errRestore
		}
		return nil
	}
	c := startClient(t, testOptions(t, srv.URL(), h))

	first := recv(t, srv.Conns(), "server conn 1")
	lost := h.nextLost(t)
	if lost.gen != 1 || !errors.Is(lost.err, errRestore) {
		t.Fatalf("Lost(gen %d, %v), want gen 1 wrapping %v", lost.gen, lost.err, errRestore)
	}
	waitClosed(t, first.Done(), "server conn 1 closed")
	if code, _, ok := first.ReceivedClose(); !ok || code != int(ws.StatusNormalClosure) {
		t.Errorf("server conn 1 received close %d (ok %v), want 1000", code, ok)
	}
	h.nextRestore(t) // gen 1
	if r := h.nextRestore(t); r.gen != 2 {
		t.Errorf("second Restore on gen %d, want 2", r.gen)
	}
	if isClosed(c.Done()) {
		t.Errorf("Client stopped: %v", c.Err())
	}
}

// TestCloseDuringBackoff: Close interrupts a long backoff wait at once.
func TestCloseDuringBackoff(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{
		Handshake: func(upstreamtest.Handshake) (int, http.Header) { return http.StatusServiceUnavailable, nil },
	})
	st := newStates()
	opts := testOptions(t, srv.URL(), newHandler())
	opts.Backoff = upstream.Backoff{Jitter: upstream.JitterNone, Base: 10 * time.Second, Cap: 10 * time.Second}
	opts.OnState = st.record
	c := startClient(t, opts)

	st.waitFor(t, upstream.StateWaiting)
	start := time.Now()
	c.Close()
	if took := time.Since(start); took >= slack {
		t.Errorf("Close during a %v backoff took %v, want < %v", opts.Backoff.Base, took, slack)
	}
	if !isClosed(c.Done()) {
		t.Error("Done not closed after Close returned")
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
	if got := c.State(); got != upstream.StateClosed {
		t.Errorf("State() = %v, want closed", got)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("server saw %d handshakes, want 1", n)
	}
}

// TestCloseLiveConnection: Close on a live connection sends close 1000,
// cancels a Restore still in progress, reports the loss as ErrClosed, is
// idempotent and safe from several goroutines, and leaves no goroutine behind.
func TestCloseLiveConnection(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	h := newHandler()
	restoreEnded := make(chan error, 1)
	h.restore = func(ctx context.Context, c *upstream.Conn) error {
		<-ctx.Done() // a restore waiting on a reply that never comes
		restoreEnded <- ctx.Err()
		return ctx.Err()
	}
	c := startClient(t, testOptions(t, srv.URL(), h))
	sc := recv(t, srv.Conns(), "server conn")
	h.nextRestore(t)

	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(c.Close)
	}
	wg.Wait()
	c.Close()
	if took := time.Since(start); took >= slack {
		t.Errorf("Close took %v, want < %v", took, slack)
	}
	if err := recv(t, restoreEnded, "Restore's end"); !errors.Is(err, context.Canceled) {
		t.Errorf("Restore's context ended with %v, want context.Canceled", err)
	}
	lost := h.nextLost(t)
	if lost.gen != 1 || !errors.Is(lost.err, upstream.ErrClosed) {
		t.Errorf("Lost(gen %d, %v), want gen 1, ErrClosed", lost.gen, lost.err)
	}
	waitClosed(t, sc.Done(), "server conn closed")
	if code, _, ok := sc.ReceivedClose(); !ok || code != int(ws.StatusNormalClosure) {
		t.Errorf("server received close %d (ok %v), want 1000", code, ok)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("server saw %d handshakes after Close, want 1", n)
	}
	_ = srv.Close()
	goleak.VerifyNone(t)
}

// TestConnAfterLossRefusesSend: a superseded Conn cannot send on the new
// connection's socket; the Handler must use the newer Conn.
func TestConnAfterLossRefusesSend(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	h := newHandler()
	startClient(t, testOptions(t, srv.URL(), h))
	sc := recv(t, srv.Conns(), "server conn 1")
	old := h.nextRestore(t).conn
	_ = sc.Reset()
	h.nextLost(t)
	if r := h.nextRestore(t); r.gen <= old.Gen() {
		t.Fatalf("new connection gen %d, want > %d", r.gen, old.Gen())
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := old.SendText(ctx, []byte("stale")); err == nil {
		t.Error("Send on a lost Conn succeeded")
	}
}

// TestSubprotocolPinnedAfterFirstConnection: the first connection's
// subprotocol is the app's, so every later dial offers only it; an upstream
// that then accepts without it stops the Client for good with a
// *SubprotocolError, reported as a "subprotocol" dial.
func TestSubprotocolPinnedAfterFirstConnection(t *testing.T) {
	hs := newHandshakeLog()
	srv := newServer(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			hs.handshake(h)
			if h.N == 1 {
				return 0, http.Header{"Sec-Websocket-Protocol": {"v1"}}
			}
			return 0, nil // no longer speaks v1
		},
		OnConn: func(c *upstreamtest.Conn) { _ = c.CloseWith(int(ws.StatusGoingAway), "") },
	})
	rec := newRecorder()
	opts := testOptions(t, srv.URL(), newHandler())
	opts.Protocols = []string{"v2", "v1"}
	opts.Observer = rec
	c := startClient(t, opts)
	rec.expect(t, "dialed ok", "lost close 1001", "dialed subprotocol")
	waitClosed(t, c.Done(), "Client stop")
	var se *upstream.SubprotocolError
	if err := c.Err(); !errors.As(err, &se) || !errors.Is(err, upstream.ErrPermanent) || se.Want != "v1" || se.Got != "" {
		t.Fatalf("Err() = %v, want a permanent *SubprotocolError wanting v1, got none", err)
	}
	hs.waitN(t, 2)
	if got := hs.offered(1); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("second dial offered %q, want only the first connection's v1", got)
	}
	if n := srv.Handshakes(); n != 2 {
		t.Errorf("%d handshakes, want 2", n)
	}
}
