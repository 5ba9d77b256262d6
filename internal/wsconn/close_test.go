package wsconn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Close writes what was queued before it, then the close frame; when the peer
// echoes, Done closes at once. CloseWait is a minute, so only the echo can have
// ended the handshake within the test timeout.
func TestCloseHandshakeEchoed(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: time.Minute})
	msgs := readLoop(t, srv)
	const queued = 50
	for i := range queued {
		mustSend(t, srv, ws.OpText, fmt.Appendf(nil, "msg %d", i))
	}
	srv.Close(ws.StatusGoingAway, "bye")
	for i := range queued {
		f := mustReadFrame(t, raw, false)
		if f.hdr.OpCode != ws.OpText || string(f.payload) != fmt.Sprintf("msg %d", i) {
			t.Fatalf("frame %d: %v %q, want text %q", i, f.hdr.OpCode, f.payload, fmt.Sprintf("msg %d", i))
		}
	}
	expectClose(t, raw, false, ws.StatusGoingAway, ptr("bye"))
	if err := srv.Send(t.Context(), ws.OpText, []byte("late")); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
	if err := srv.Ping(nil); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}
	writeRaw(t, raw, clientFrame(ws.OpClose, true, closeBody(ws.StatusGoingAway, "")))
	waitDone(t, srv, testTimeout)
	ce := asCloseError(t, recv(t, msgs).err)
	if ce.Code != ws.StatusGoingAway {
		t.Fatalf("reader got close %d, want the echoed 1001", ce.Code)
	}
	// tether initiated: the peer's echo is not answered with another close.
	if f, err := readFrame(raw); err == nil {
		t.Fatalf("frame %v after the close handshake, want EOF", f.hdr.OpCode)
	}
}

// A peer that reads the close frame but never answers gets TCP closed after
// CloseWait, not before, and not much later.
func TestCloseWithoutEcho(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	msgs := readLoop(t, srv)
	start := time.Now()
	srv.Close(ws.StatusNormalClosure, "")
	expectClose(t, raw, false, ws.StatusNormalClosure, ptr(""))
	waitDone(t, srv, 10*closeWait)
	if elapsed := time.Since(start); elapsed < closeWait {
		t.Fatalf("TCP closed after %v, before CloseWait %v", elapsed, closeWait)
	}
	// The reader learns that the socket is gone, not that the peer closed.
	if err := recv(t, msgs).err; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("reader error %v, want net.ErrClosed", err)
	}
	if _, err := readFrame(raw); err == nil {
		t.Fatal("raw peer can still read after tether closed TCP")
	}
}

// The same without a reader at all (the owner stopped reading for backpressure):
// Close must not depend on ReadMessage being called.
func TestCloseWithoutReader(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
	srv.Close(ws.StatusNormalClosure, "")
	expectClose(t, raw, false, ws.StatusNormalClosure, nil)
	waitDone(t, srv, 10*closeWait)
}

// The client side masks its close frame, and a gobwas server can parse it.
func TestCloseFromClientSide(t *testing.T) {
	cli, raw := clientSide(t, wsconn.Options{CloseWait: closeWait})
	cli.Close(4001, "reauth")
	expectClose(t, raw, true, 4001, ptr("reauth"))
	waitDone(t, cli, 10*closeWait)
}

func TestCloseBody(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		name       string
		code       ws.StatusCode
		reason     string
		wantCode   ws.StatusCode
		wantReason string
	}{
		{"plain", 1001, "bye", 1001, "bye"},
		{"private code", 4999, "", 4999, ""},
		{"1005 is never sent", 1005, "x", 1000, "x"},
		{"1006 is never sent", 1006, "", 1000, ""},
		{"1015 is never sent", 1015, "", 1000, ""},
		{"999 is never sent", 999, "", 1000, ""},
		{"reason of 123 bytes kept", 1000, long[:123], 1000, long[:123]},
		{"ASCII reason cut to 123", 1000, long, 1000, long[:123]},
		// "é" is 2 bytes at offsets 122–123: cutting at 123 would split it.
		{"2-byte rune on the boundary", 1000, long[:122] + "é" + "zz", 1000, long[:122]},
		// "€" is 3 bytes at 121–123.
		{"3-byte rune on the boundary", 1000, long[:121] + "€" + "zz", 1000, long[:121]},
		// "😀" is 4 bytes at 119–122: it fits, the next byte is cut.
		{"4-byte rune that fits", 1000, long[:119] + "😀" + "zz", 1000, long[:119] + "😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{CloseWait: closeWait})
			srv.Close(tt.code, tt.reason)
			expectClose(t, raw, false, tt.wantCode, &tt.wantReason)
		})
	}
}

func TestCloseTwiceSendsOneFrame(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{CloseWait: time.Minute})
	readLoop(t, srv)
	srv.Close(ws.StatusGoingAway, "first")
	srv.Close(ws.StatusNormalClosure, "second")
	expectClose(t, raw, false, ws.StatusGoingAway, ptr("first"))
	writeRaw(t, raw, clientFrame(ws.OpClose, true, closeBody(ws.StatusGoingAway, "")))
	waitDone(t, srv, testTimeout)
	if f, err := readFrame(raw); err == nil {
		t.Fatalf("second frame %v after close, want EOF", f.hdr.OpCode)
	}
}

func TestPeerClose(t *testing.T) {
	tests := []struct {
		name       string
		body       []byte
		wantCode   ws.StatusCode // in CloseError
		wantEcho   ws.StatusCode
		wantReason string
	}{
		{"with code and reason", closeBody(ws.StatusGoingAway, "going"), 1001, 1001, "going"},
		{"private code", closeBody(4003, "forbidden"), 4003, 4003, "forbidden"},
		// No code: the connection close code is 1005 (RFC 6455 §7.1.5), the echo 1000.
		{"empty", nil, ws.StatusNoStatusRcvd, ws.StatusNormalClosure, ""},
	}
	for _, tt := range tests {
		t.Run("server/"+tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{CloseWait: time.Minute})
			writeRaw(t, raw, clientFrame(ws.OpText, true, []byte("before")), clientFrame(ws.OpClose, true, tt.body))
			checkMessage(t, srv, ws.OpText, []byte("before"))
			checkPeerClose(t, srv, raw, false, tt.wantCode, tt.wantReason, tt.wantEcho)
		})
		t.Run("client/"+tt.name, func(t *testing.T) {
			cli, raw := clientSide(t, wsconn.Options{CloseWait: time.Minute})
			writeRaw(t, raw, ws.NewCloseFrame(tt.body))
			checkPeerClose(t, cli, raw, true, tt.wantCode, tt.wantReason, tt.wantEcho)
		})
	}
}

func checkPeerClose(t *testing.T, c *wsconn.Conn, raw net.Conn, masked bool, code ws.StatusCode, reason string, echo ws.StatusCode) {
	t.Helper()
	_, _, err := c.ReadMessage()
	ce := asCloseError(t, err)
	if ce.Code != code || ce.Reason != reason {
		t.Fatalf("CloseError{%d, %q}, want {%d, %q}", ce.Code, ce.Reason, code, reason)
	}
	if _, _, again := c.ReadMessage(); again != err {
		t.Fatalf("second ReadMessage: %v, want the same %v", again, err)
	}
	expectClose(t, raw, masked, echo, ptr(""))
	if err := c.Send(t.Context(), ws.OpText, []byte("late")); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("Send after peer close: %v, want ErrClosed", err)
	}
	// The peer closed first: once the echo is out tether closes TCP, without
	// waiting out CloseWait (a minute here).
	waitDone(t, c, testTimeout)
}

// Abort unblocks a ReadMessage waiting on another goroutine and a Send waiting
// for queue space, and Done closes.
func TestAbortUnblocks(t *testing.T) {
	p := newRawPair(t)
	shrinkSendBuffer(t, p.server)
	srv := wrap(t, p.server, nil, wsconn.Options{QueueBytes: 1 << 10})
	msgs := readLoop(t, srv)
	// Fill first, so the sender below waits on a writer the kernel has stopped,
	// not just on one that is momentarily behind.
	fillUntilBlocked(t, srv, 512, nil)

	// The sender keeps going until the connection stops it; the peer never
	// reads, so it ends up blocked on queue space.
	sendErr := make(chan error, 1)
	go func() {
		for {
			if err := srv.Send(context.Background(), ws.OpBinary, make([]byte, 512)); err != nil {
				sendErr <- err
				return
			}
		}
	}()
	waitFor(t, "Send blocked on queue space", srv.SendWaiting)

	srv.Abort()
	select {
	case err := <-sendErr:
		if !errors.Is(err, wsconn.ErrClosed) {
			t.Fatalf("blocked Send returned %v, want ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Abort did not unblock Send")
	}
	if err := recv(t, msgs).err; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked ReadMessage returned %v, want net.ErrClosed", err)
	}
	waitDone(t, srv, testTimeout)
	srv.Abort() // idempotent
}

// A peer that vanishes (TCP closed without a close frame) ends ReadMessage with a
// socket error, and the Conn shuts itself down.
func TestPeerVanishes(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{})
	_ = raw.Close()
	_, _, err := srv.ReadMessage()
	if err == nil {
		t.Fatal("ReadMessage succeeded on a closed socket")
	}
	var ce *wsconn.CloseError
	var pe *wsconn.ProtocolError
	if errors.As(err, &ce) || errors.As(err, &pe) {
		t.Fatalf("got %v, want a socket error", err)
	}
	waitDone(t, srv, testTimeout)
}

// waitFor polls cond: the condition is internal state with no channel to wait on.
// It yields rather than sleeps, and is bounded by the test timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testTimeout)
		}
		runtime.Gosched()
	}
}
