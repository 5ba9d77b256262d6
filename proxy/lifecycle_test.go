package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// When the app closes, the session closes its upstream with 1000 and frees
// everything (docs/design.md "Sessions").
func TestAppCloseClosesUpstream(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	e.expectSessions(t, 1)

	a.closeNormally(t)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	e.expectSessions(t, 0)
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1: a closed session must not redial", n)
	}
}

// A message the app sends right before its close reaches the upstream,
// ahead of the close: the app's last words are not lost. (The connection is
// live first: what an app sends before its first restore is done waits in
// the outbox, which goes with the session if the app leaves before: see
// TestUnsentOutboxCounted.) The upstream reading a first message does not
// prove the connection live: the app is accepted once the upstream is
// dialed, and a message sent while the restore runs is flushed by it, with
// the switch to live still to come. The restore counter does: it counts a
// connection once it is live. No heartbeat: a pong late on a loaded machine
// would reconnect, and the last words would go to the next connection.
func TestAppMessageBeforeCloseReachesUpstream(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), noHeartbeat)
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	a.sendText(t, "first words")
	up.expectFromApp(t, c.N(), ws.OpText, "first words")
	awaitRestores(t, e, 1)

	a.sendText(t, "last words")
	a.closeNormally(t)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	up.expectFromApp(t, c.N(), ws.OpText, "last words")
	up.expectNothingFromApp(t)
}

// expectUpstreamClosedWith waits for c to end and checks tether's close frame.
func expectUpstreamClosedWith(t *testing.T, c *upstreamtest.Conn, code ws.StatusCode) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(testTimeout):
		t.Fatalf("upstream connection %d still open after %v", c.N(), testTimeout)
	}
	got, reason, ok := c.ReceivedClose()
	if !ok || got != int(code) {
		t.Fatalf("upstream connection %d got close %v (%d %q), want %d", c.N(), ok, got, reason, code)
	}
}

// A second app beyond MaxSessions is refused with 503 before any upstream
// dial; once the first leaves, the slot is free again.
func TestMaxSessions(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.MaxSessions = 1 })
	first := dialApp(t, e.url, appOptions{})
	up.nextConn(t)

	_, ref, err := tryDialApp(t, e.url, appOptions{})
	if err == nil || ref.status != http.StatusServiceUnavailable {
		t.Fatalf("second app: err %v, status %d; want HTTP 503", err, ref.status)
	}
	if !strings.Contains(ref.body, "TETHER_MAX_SESSIONS") {
		t.Errorf("503 body %q does not name TETHER_MAX_SESSIONS", ref.body)
	}
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1: a refused app must not reach it", n)
	}

	first.closeNormally(t)
	e.expectSessions(t, 0)
	third := dialApp(t, e.url, appOptions{})
	third.sendText(t, "room again")
	c := up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, "room again")
}

// An app message over MaxMessageBytes closes the app with 1009; one at the
// limit passes.
func TestOversizedAppMessage(t *testing.T) {
	const limit = 1 << 10
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.MaxMessageBytes = limit })
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)

	atLimit := strings.Repeat("a", limit)
	a.sendText(t, atLimit)
	up.expectFromApp(t, c.N(), ws.OpText, atLimit)

	a.sendText(t, strings.Repeat("b", limit+1))
	a.expectClosed(t, testTimeout, ws.StatusMessageTooBig, "message exceeds the size limit")
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	up.expectNothingFromApp(t)
	e.expectSessions(t, 0)
}

// Shutdown closes every app with 1001 and every upstream with 1000, returns
// once all sessions are gone, and stops accepting.
func TestShutdownDrains(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), nil)
	apps := []*app{dialApp(t, e.url, appOptions{}), dialApp(t, e.url, appOptions{})}
	conns := []*upstreamtest.Conn{up.nextConn(t), up.nextConn(t)}
	e.expectSessions(t, 2)

	const drain = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx, drain); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// Two apps over 200ms: the second is closed one step (100ms) after the first.
	within(t, "Shutdown", time.Since(start), drain/2, drain+slack)
	for _, a := range apps {
		a.expectClosed(t, testTimeout, ws.StatusGoingAway, "tether shutting down")
	}
	for _, c := range conns {
		expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	}
	if n := e.srv.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after Shutdown, want 0", n)
	}
	if err := e.srv.Ready(); err == nil {
		t.Error("Ready() = nil after Shutdown")
	}
	if _, _, err := tryDialApp(t, e.url, appOptions{}); err == nil {
		t.Error("app connected after Shutdown")
	}
	if err := e.srv.Shutdown(ctx, drain); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// Shutdown interrupts the upstream's backoff wait: a session waiting out a
// 10s delay is gone in well under a second.
func TestShutdownDuringBackoff(t *testing.T) {
	const base = 10 * time.Second
	up := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) {
		return http.StatusServiceUnavailable, nil
	}})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		// No jitter: the wait is exactly base, so the session is certainly
		// waiting when Shutdown comes.
		o.Upstream.Backoff = upstream.Backoff{Jitter: upstream.JitterNone, Base: base, Cap: base}
	})
	a := dialApp(t, e.url, appOptions{})
	e.states.await(t, upstream.StateWaiting)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx, 0); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	within(t, "Shutdown", time.Since(start), 0, time.Second)
	a.expectClosed(t, testTimeout, ws.StatusGoingAway, "tether shutting down")
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1", n)
	}
}

// When Shutdown's context ends before an app answers its close frame, the
// remaining sessions are cut at once (server.go's contract), not after the
// app socket's own close timeout.
func TestShutdownDeadlineCutsSessions(t *testing.T) {
	const deadline = 300 * time.Millisecond
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{noEcho: true})
	c := up.nextConn(t)
	e.expectSessions(t, 1)

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := e.srv.Shutdown(ctx, 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
	}
	// Without the cut, the app socket would wait out wsconn's close wait (2s).
	within(t, "Shutdown", time.Since(start), deadline, wsconn.DefaultCloseWait/2+deadline)
	a.expectClosed(t, testTimeout, ws.StatusGoingAway, "tether shutting down")
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	if n := e.srv.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after Shutdown, want 0", n)
	}
}

// An app whose handshake is still waiting for the first upstream dial when
// Shutdown starts is answered 503 at once: Shutdown does not wait for the
// dial, nor for AcceptWait, and the app never gets a socket that is closed
// again right away.
func TestShutdownDuringAppHandshake(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	fp := newFaultProxy(t, up.srv.Addr())
	fp.Blackhole(true) // the first dial hangs: the app waits AcceptWait
	e := newTether(t, fp.URL(), func(o *proxy.Options) { o.AcceptWait = time.Minute })

	type answer struct {
		ref refusal
		err error
	}
	dialed := make(chan answer, 1)
	go func() {
		_, ref, err := tryDialApp(t, e.url, appOptions{}) // an app accepted is closed at cleanup
		dialed <- answer{ref, err}
	}()
	e.expectSessions(t, 1) // admitted, waiting for the upstream

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx, 0); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	within(t, "Shutdown", time.Since(start), 0, slack)
	got := <-dialed
	if got.err == nil || got.ref.status != http.StatusServiceUnavailable || !strings.Contains(got.ref.body, "tether is shutting down") {
		t.Fatalf("app handshake during the drain: %v, status %d %q; want 503 tether is shutting down", got.err, got.ref.status, got.ref.body)
	}
}

// An app that disappears while its handshake waits for the upstream frees its
// session, even though the upstream connected and pushed a message that now
// has nowhere to go.
func TestAppGoneDuringHandshake(t *testing.T) {
	const wait, latency = 2 * time.Second, 100 * time.Millisecond
	up := newUpstream(t, upstreamConfig{greeting: "pushed at once"})
	fp := newFaultProxy(t, up.srv.Addr())
	// Slow enough that the app is gone before the upstream answers, well
	// within AcceptWait.
	fp.SetLatency(latency)
	e := newTether(t, fp.URL(), func(o *proxy.Options) {
		o.AcceptWait = wait
		noHeartbeat(o) // a ping's round trip takes 2×latency
	})

	raw, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(e.url, "ws://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := "GET / HTTP/1.1\r\nHost: " + raw.RemoteAddr().String() + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := raw.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	e.expectSessions(t, 1) // request read, upstream dial under way
	// Reset, so that tether's 101 fails to write.
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = raw.Close()

	c := up.nextConn(t)
	e.expectSessions(t, 0)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
}

// An app that stops reading fills tether's bounded queue towards it; tether
// then stops reading the upstream instead of buffering more, and does not
// take that silence for a dead upstream (docs/design.md "Local listener and
// security", last point). Memory stays bounded: the queue holds at most
// DownstreamBufferBytes plus one message, and the live heap grows by a
// fraction of what the upstream offered. When the app reads again,
// everything arrives, once and in order.
func TestSlowAppDoesNotKillUpstream(t *testing.T) {
	const (
		count   = 1000
		size    = 32 << 10 // 32 MiB in all: beyond the 1 MiB downstream buffer and the kernel's socket buffers (awaitAppQueued)
		buffer  = 1 << 20  // baseOptions' DownstreamBufferBytes
		message = size + 4 // "999|" + padding
		// sendBuffer fixes tether's send buffer towards the app, as in
		// TestSSESlowAppBackPressure: left to the kernel it grows to 4 MiB,
		// which must fill before the queue does (a load of 30 left the
		// queue at 800 KB after 5 s), and leaves the writer megabytes of
		// room to empty a queue it filled while merely starved.
		sendBuffer = 64 << 10
	)
	up := newUpstream(t, upstreamConfig{})
	e := newTetherOn(t, up.srv.URL(), nil, func(ln net.Listener) net.Listener {
		return sendBufferListener{Listener: ln, bytes: sendBuffer}
	})
	baseHeap := liveHeap()
	paused := make(chan struct{})
	a := dialApp(t, e.url, appOptions{paused: paused})
	c := up.nextConn(t)

	padding := strings.Repeat("x", size)
	sent := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range count {
			if err := c.Send(fmt.Sprintf("%d|%s", i, padding)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })

	// Once the queue is full, tether's upstream reader waits for room: three
	// times the detection bound without a frame from the upstream reaching
	// it.
	awaitAppQueued(t, e.srv, buffer-message)
	e.states.expectNone(t, upstream.StateLost, 3*(pingInterval+pingTimeout))
	select {
	case err := <-sent:
		t.Fatalf("upstream sent everything (%v) while the app read nothing: the backlog fit in buffers, "+
			"backpressure was not exercised", err)
	default:
	}
	queued := e.srv.AppQueuedBytes()
	if len(queued) != 1 || queued[0] > buffer+message || queued[0] < buffer-message {
		t.Errorf("bytes queued towards the paused app: %v, want one session with about DownstreamBufferBytes (%d)",
			queued, buffer)
	}
	grown := liveHeap() - baseHeap
	t.Logf("paused app: %v bytes queued towards it, live heap +%d bytes, %d bytes offered", queued, grown, count*size)
	if grown > count*size/4 {
		t.Errorf("live heap grew by %d bytes while the app was paused, want under a quarter of the %d offered",
			grown, count*size)
	}
	close(paused)
	for i := range count {
		m := a.next(t)
		if want := fmt.Sprintf("%d|%s", i, padding); string(m.data) != want {
			t.Fatalf("message %d: got %d bytes starting %.10q", i, len(m.data), m.data)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("upstream send: %v", err)
	}
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1", n)
	}
	a.expectOpen(t)
}

// liveHeap is the heap still referenced after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
