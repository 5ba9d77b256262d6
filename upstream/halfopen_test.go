package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// heartbeatOptions is testOptions with the heartbeat on.
func heartbeatOptions(t *testing.T, url string, h *handler) upstream.Options {
	opts := testOptions(t, url, h)
	opts.PingInterval = pingInterval
	opts.PingTimeout = pingTimeout
	return opts
}

// checkDetection asserts that a connection whose last inbound frame arrived
// at last was declared dead within PingInterval + PingTimeout (docs/design.md
// "Dead detection"), and not before: timers never fire early, so the lower
// bound needs no slack.
func checkDetection(t *testing.T, lost event, last time.Time) {
	t.Helper()
	if !errors.Is(lost.err, upstream.ErrHeartbeatTimeout) {
		t.Fatalf("Lost(gen %d, %v), want ErrHeartbeatTimeout", lost.gen, lost.err)
	}
	bound := pingInterval + pingTimeout
	took := lost.at.Sub(last)
	t.Logf("half-open detected %v after the last frame (PingInterval %v + PingTimeout %v = %v)",
		took, pingInterval, pingTimeout, bound)
	if took < bound || took > bound+slack {
		t.Errorf("detected after %v, want in [%v, %v]", took, bound, bound+slack)
	}
}

// sendThen is an OnConn: connection 1 ignores pings, sends "last" and does
// what then says; later connections send "N-hello" and stay healthy.
func sendThen(then func(c *upstreamtest.Conn)) func(c *upstreamtest.Conn) {
	return func(c *upstreamtest.Conn) {
		if c.N() == 1 {
			// No pong may follow "last": it must be the final frame.
			c.IgnorePings(true)
			_ = c.Send("last")
			then(c)
			return
		}
		_ = c.Send(fmt.Sprintf("%d-hello", c.N()))
		holdOpen(c)
	}
}

// expectReconnected asserts the Client came back on gen 2 and receives there.
func expectReconnected(t *testing.T, h *handler) {
	t.Helper()
	h.nextRestore(t) // gen 1
	if r := h.nextRestore(t); r.gen != 2 {
		t.Fatalf("reconnected on gen %d, want 2", r.gen)
	}
	if m := h.nextMessage(t); m.gen != 2 || m.data != "2-hello" {
		t.Errorf("Message(gen %d, %q), want (gen 2, \"2-hello\")", m.gen, m.data)
	}
}

// TestHalfOpenStall: the server goes silent with TCP still open (a crashed
// host behind a NAT that keeps the flow). WebSocket pings go unanswered; the
// connection is declared dead and replaced.
func TestHalfOpenStall(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{OnConn: sendThen(func(c *upstreamtest.Conn) {
		c.Stall()
		holdOpen(c)
	})})
	h := newHandler()
	startClient(t, heartbeatOptions(t, srv.URL(), h))

	last := h.nextMessage(t)
	if last.data != "last" {
		t.Fatalf("first message %q, want \"last\"", last.data)
	}
	lost := h.nextLost(t)
	checkDetection(t, lost, last.at)
	expectReconnected(t, h)
}

// TestHalfOpenBlackhole: the network path drops everything in both
// directions (a FaultProxy blackhole): the same detection bound holds.
func TestHalfOpenBlackhole(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{OnConn: sendThen(holdOpen)})
	proxy, err := upstreamtest.NewFaultProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	h := newHandler()
	startClient(t, heartbeatOptions(t, proxy.URL(), h))

	last := h.nextMessage(t)
	if last.data != "last" {
		t.Fatalf("first message %q, want \"last\"", last.data)
	}
	proxy.Blackhole(true)
	lost := h.nextLost(t)
	checkDetection(t, lost, last.at)
	proxy.Blackhole(false) // the redial was held in the proxy until now
	expectReconnected(t, h)
}

// TestHeartbeatMessage: with an application-level heartbeat, the server's
// replies keep the connection up for many intervals and never reach the
// Handler; no WebSocket ping is sent. When the replies stop, the connection
// is declared dead within the same bound.
func TestHeartbeatMessage(t *testing.T) {
	const answers = 5
	var (
		replying  atomic.Bool
		mu        sync.Mutex
		lastReply time.Time
	)
	replying.Store(true)
	answered := make(chan struct{}, 1024)
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		for {
			_, data, err := c.Read(c.Context())
			if err != nil {
				return
			}
			if string(data) != "hb" || !replying.Load() {
				continue
			}
			mu.Lock()
			lastReply = time.Now()
			mu.Unlock()
			_ = c.Send("hb-ok")
			answered <- struct{}{}
		}
	}})
	h := newHandler()
	opts := heartbeatOptions(t, srv.URL(), h)
	opts.HeartbeatMessage = []byte("hb")
	opts.HeartbeatReply = func(b []byte) bool { return string(b) == "hb-ok" }
	startClient(t, opts)
	sc := recv(t, srv.Conns(), "server conn")

	// Each probe follows PingInterval of silence, so five answered probes
	// span at least five intervals.
	start := time.Now()
	for range answers {
		recv(t, answered, "heartbeat")
	}
	if took := time.Since(start); took < (answers-1)*pingInterval {
		t.Errorf("%d probes within %v: sent faster than PingInterval %v", answers, took, pingInterval)
	}
	if lost, ok := pending(h.losts); ok {
		t.Fatalf("Lost(gen %d, %v) while the server answered every heartbeat", lost.gen, lost.err)
	}
	if m, ok := pending(h.messages); ok {
		t.Errorf("heartbeat reply reached the Handler: %q", m.data)
	}
	if n := sc.Pings(); n != 0 {
		t.Errorf("server received %d WebSocket pings, want 0 with HeartbeatMessage set", n)
	}

	replying.Store(false)
	lost := h.nextLost(t)
	mu.Lock()
	last := lastReply
	mu.Unlock()
	if lost.gen != 1 {
		t.Errorf("Lost on gen %d, want 1", lost.gen)
	}
	checkDetection(t, lost, last)
	if got := h.messagesOf(1); len(got) != 0 {
		t.Errorf("Handler received %q on gen 1, want nothing", got)
	}
}

// TestBusyReaderNotDead: a Handler that blocks on one message for three
// times the detection bound stops the Client from reading, but that is
// backpressure, not silence: the connection must survive.
func TestBusyReaderNotDead(t *testing.T) {
	const block = 3 * (pingInterval + pingTimeout)
	acked := make(chan struct{})
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send("slow")
		_ = c.Send("after")
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
	h := newHandler()
	h.message = func(_ *upstream.Conn, _ ws.OpCode, data []byte) {
		if string(data) != "slow" {
			return
		}
		timer := time.NewTimer(block)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-h.quit:
		}
	}
	startClient(t, heartbeatOptions(t, srv.URL(), h))

	slow := h.nextMessage(t)
	after := h.nextMessage(t)
	if slow.data != "slow" || after.data != "after" || after.gen != 1 {
		t.Fatalf("messages (gen %d %q), (gen %d %q), want \"slow\" then \"after\" on gen 1",
			slow.gen, slow.data, after.gen, after.data)
	}
	if blocked := after.at.Sub(slow.at); blocked < block {
		t.Fatalf("Handler blocked %v, want ≥ %v", blocked, block)
	}
	// A connection declared dead has been aborted: Send would fail and the
	// server would not see the ack.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := after.conn.SendText(ctx, []byte("ack")); err != nil {
		t.Fatalf("Send after the busy period: %v (connection declared dead?)", err)
	}
	waitClosed(t, acked, "ack at the server")
	if lost, ok := pending(h.losts); ok {
		t.Errorf("Lost(gen %d, %v) during backpressure", lost.gen, lost.err)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
}

// waitCount polls n until it reaches want, and returns how long that took;
// the test fails past limit. For counters kept by the test server, which
// has no event to wait on.
func waitCount(t *testing.T, what string, n func() int, want int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if !pollCount(ctx, n, want) {
		t.Fatalf("%s: %d within %v, want %d", what, n(), limit, want)
	}
	return time.Since(start)
}

// pollCount polls n until it reaches want (true) or ctx ends (false).
func pollCount(ctx context.Context, n func() int, want int) bool {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n() < want {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// TestPingCadence: an idle connection whose server answers every ping is
// pinged every PingInterval, not every PingTimeout when that is longer:
// NAT and load-balancer idle timeouts cut a connection kept alive less
// often than configured.
func TestPingCadence(t *testing.T) {
	const (
		interval = 50 * time.Millisecond
		timeout  = 2 * time.Second
		pings    = 6
	)
	srv := newServer(t, upstreamtest.Options{OnConn: holdOpen})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.PingInterval, opts.PingTimeout = interval, timeout
	startClient(t, opts)
	sc := recv(t, srv.Conns(), "server conn")
	took := waitCount(t, "pings at the server", sc.Pings, pings, waitLimit+timeout*pings)
	t.Logf("%d pings in %v (PingInterval %v, PingTimeout %v)", pings, took, interval, timeout)
	if bound := pings*interval + slack; took > bound {
		t.Errorf("%d pings took %v, want ≤ %v: one per PingInterval of silence", pings, took, bound)
	}
	if lost, ok := pending(h.losts); ok {
		t.Errorf("Lost(gen %d, %v) while every ping was answered", lost.gen, lost.err)
	}
}

// TestHalfOpenAfterFrameDuringProbe: the server ignores pings, sends one
// message while the first ping waits for its answer, then nothing: the
// connection is declared dead within PingInterval + PingTimeout of that
// message, not up to two PingTimeouts later.
func TestHalfOpenAfterFrameDuringProbe(t *testing.T) {
	const (
		interval = 100 * time.Millisecond
		timeout  = 3 * time.Second
	)
	srv := newServer(t, upstreamtest.Options{IgnorePings: true, OnConn: func(c *upstreamtest.Conn) {
		if c.N() > 1 {
			holdOpen(c)
			return
		}
		if pollCount(c.Context(), c.Pings, 1) { // the first ping waits for its answer
			_ = c.Send("last")
		}
		holdOpen(c)
	}})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.PingInterval, opts.PingTimeout = interval, timeout
	startClient(t, opts)
	last := h.nextMessage(t)
	lost := recv(t, h.losts, "Lost")
	if !errors.Is(lost.err, upstream.ErrHeartbeatTimeout) {
		t.Fatalf("Lost(gen %d, %v), want ErrHeartbeatTimeout", lost.gen, lost.err)
	}
	took, bound := lost.at.Sub(last.at), interval+timeout
	t.Logf("half-open detected %v after the last frame (PingInterval %v + PingTimeout %v = %v)", took, interval, timeout, bound)
	if took < bound || took > bound+slack {
		t.Errorf("detected after %v, want in [%v, %v]", took, bound, bound+slack)
	}
}
