package upstream_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// flushHandler is the test handler with a Flush that records its calls, as
// a Handler that holds messages back has. flush, when set, runs inside each
// call.
type flushHandler struct {
	*handler
	flushes chan event
	flush   func()
}

func newFlushHandler() *flushHandler {
	return &flushHandler{handler: newHandler(), flushes: make(chan event, 1024)}
}

func (h *flushHandler) Flush(c *upstream.Conn) {
	h.note(fmt.Sprintf("flush %d", c.Gen()))
	h.report(h.flushes, event{gen: c.Gen(), conn: c, at: time.Now()})
	if h.flush != nil {
		h.flush()
	}
}

// startFlushClient starts a Client on h, whose reports stop at cleanup.
func startFlushClient(t *testing.T, opts upstream.Options, h *flushHandler) {
	t.Helper()
	opts.Handler = h
	startClient(t, opts)
	t.Cleanup(h.stop) // before the Client's Close: cleanups run last first
}

// A Handler gets Flush before the reader waits for the socket:
// after the last message of a burst, with nothing else arriving, and before
// Lost when the connection ends, with no message in between.
func TestFlushBeforeWait(t *testing.T) {
	const burst = 50
	release := make(chan struct{})
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		for i := range burst {
			_ = c.Send(fmt.Sprintf("m%d", i))
		}
		select {
		case <-release:
			_ = c.Close()
		case <-c.Context().Done():
		}
	}})
	h := newFlushHandler()
	opts := testOptions(t, srv.URL(), h.handler)
	opts.MaxAttempts = 1
	startFlushClient(t, opts, h)

	for range burst {
		h.nextMessage(t)
	}
	waitFlushAfter(t, h, burst)
	close(release)
	h.nextLost(t)
	calls := slices.DeleteFunc(h.calls(), func(c string) bool { return c == "restore 1" }) // concurrent
	lost := slices.Index(calls, "lost 1")
	if lost < 1 || calls[lost-1] != "flush 1" {
		t.Errorf("calls end %q, want a flush right before Lost", calls[max(0, lost-3):])
	}
}

// waitFlushAfter waits for a Flush that follows the n-th message.
func waitFlushAfter(t *testing.T, h *flushHandler, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		calls := h.calls()
		seen := 0
		for _, c := range calls {
			switch {
			case c == "message 1":
				seen++
			case c == "flush 1" && seen == n:
				return
			}
		}
		select {
		case <-h.flushes:
		case <-deadline.C:
			t.Fatalf("no Flush after message %d within %v; calls %q", n, waitLimit, calls)
		}
	}
}

// A Flush blocked on the app for three times the detection bound is
// backpressure, like a blocked Message: the connection survives, though the
// server's pongs wait unread in the socket meanwhile.
func TestFlushBlockedNotDead(t *testing.T) {
	const block = 3 * (pingInterval + pingTimeout)
	acked := make(chan struct{})
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send("slow")
		for {
			_, data, err := c.Read(c.Context())
			if err != nil {
				return
			}
			if string(data) == "ack" {
				close(acked)
			}
		}
	}})
	h := newFlushHandler()
	blocked, unblocked := make(chan struct{}), make(chan struct{})
	h.flush = func() {
		if !h.hasMessage(1) || isClosed(blocked) {
			return // the flush before the first read, or after the block
		}
		close(blocked)
		defer close(unblocked)
		timer := time.NewTimer(block)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-h.quit:
		}
	}
	startFlushClient(t, heartbeatOptions(t, srv.URL(), h.handler), h)

	m := h.nextMessage(t)
	waitClosed(t, blocked, "a blocked Flush")
	waitClosed(t, unblocked, "the end of the blocked Flush")
	// A connection declared dead has been aborted: Send would fail and the
	// server would not see the ack.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := m.conn.SendText(ctx, []byte("ack")); err != nil {
		t.Fatalf("Send after the blocked Flush: %v (connection declared dead?)", err)
	}
	waitClosed(t, acked, "ack at the server")
	if lost, ok := pending(h.losts); ok {
		t.Errorf("Lost(gen %d, %v) during backpressure in Flush", lost.gen, lost.err)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
}

// hasMessage reports whether connection gen delivered a message yet.
func (h *handler) hasMessage(gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byGen[gen]) > 0
}

// A message the reader refuses (invalid UTF-8) right behind others in the
// same read still gets the messages before it flushed ahead of Lost: the
// error comes without a read from the socket, so without the flush that
// precedes one.
func TestFlushBeforeProtocolError(t *testing.T) {
	var burst bytes.Buffer
	for _, f := range []ws.Frame{ws.NewTextFrame([]byte("a")), ws.NewTextFrame([]byte("b")), ws.NewTextFrame([]byte{0xff})} {
		if err := ws.WriteFrame(&burst, f); err != nil {
			t.Fatal(err)
		}
	}
	url := rawServer(t, func(nc net.Conn) { _, _ = nc.Write(burst.Bytes()) })
	h := newFlushHandler()
	opts := testOptions(t, url, h.handler)
	opts.MaxAttempts = 1
	startFlushClient(t, opts, h)

	h.nextLost(t)
	calls := slices.DeleteFunc(h.calls(), func(c string) bool { return c == "restore 1" }) // concurrent
	want := []string{"message 1", "message 1", "flush 1", "lost 1"}
	if len(calls) < len(want) || !slices.Equal(calls[len(calls)-len(want):], want) {
		t.Fatalf("calls %q, want them to end %q", calls, want)
	}
}

// rawServer accepts one WebSocket connection on loopback, runs serve on it
// and keeps it open until the test ends. It returns the URL to dial.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = nc.Close() }()
		if _, err := (ws.Upgrader{}).Upgrade(nc); err != nil {
			return
		}
		serve(nc)
		<-done
	}()
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		wg.Wait()
	})
	return "ws://" + ln.Addr().String() + "/"
}
