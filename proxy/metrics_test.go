package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// counts is a proxy.Metrics that counts every call by name ("message
// app_to_upstream", "rejected max_sessions", ...).
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounts() *counts { return &counts{n: map[string]int{}} }

func (c *counts) add(key string, n int) {
	c.mu.Lock()
	c.n[key] += n
	c.mu.Unlock()
}

func (c *counts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// await waits until key has been counted want times, and fails if it goes
// beyond.
func (c *counts) await(t *testing.T, key string, want int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q counted %d times (now %d)", key, want, c.get(key)), func() bool { return c.get(key) >= want })
	if got := c.get(key); got != want {
		t.Fatalf("%q counted %d times, want %d", key, got, want)
	}
}

// Sessions and messages are counted under their plain name and, with the
// listener kind, under "session started tcp", "message app_to_upstream tcp".
func (c *counts) SessionStarted(l string) {
	c.add("session started", 1)
	c.add("session started "+l, 1)
}
func (c *counts) SessionEnded(l string)        { c.add("session ended", 1); c.add("session ended "+l, 1) }
func (c *counts) Forwarded(d, l string, n int) { c.add("message "+d, n); c.add("message "+d+" "+l, n) }
func (c *counts) AppDropped(r string)          { c.add("app dropped "+r, 1) }
func (c *counts) DroppedFromOutbox(n int)      { c.add("outbox dropped", n) }
func (c *counts) HandshakeRejected(r string)   { c.add("rejected "+r, 1) }
func (c *counts) SSEResumed(o string)          { c.add("sse resume "+o, 1) }
func (c *counts) DrainStarted()                { c.add("drain started", 1) }
func (c *counts) Replayed(n int)               { c.add("replayed", n) }
func (c *counts) DuplicateDropped()            { c.add("duplicate", 1) }
func (c *counts) Gap(o string)                 { c.add("gap "+o, 1) }
func (c *counts) Recovered(m string)           { c.add("recovered "+m, 1) }
func (c *counts) HeldBytesChanged(d int)       { c.add("held bytes", d) }

// echo is an upstream script that sends every message back.
func echo(_ *upstreamEnv, c *upstreamtest.Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if op == ws.OpBinary {
			err = c.SendBinary(data)
		} else {
			err = c.Send(string(data))
		}
		if err != nil {
			return
		}
	}
}

// Sessions are counted from admission to the end, messages once per
// direction when they are received from the app and delivered to it.
func TestMetricsSessionsAndMessages(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: echo})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })
	a := dialApp(t, e.url, appOptions{})
	b := dialApp(t, e.url, appOptions{})
	m.await(t, "session started", 2)

	a.sendText(t, "one")
	a.expectText(t, "one")
	a.send(t, ws.OpBinary, "two")
	if got := a.next(t); string(got.data) != "two" {
		t.Fatalf("app got %q, want the echo of two", got.data)
	}
	m.await(t, "message "+labels.DirectionAppToUpstream, 2)
	m.await(t, "message "+labels.DirectionUpstreamToApp, 2)

	a.closeNormally(t)
	m.await(t, "session ended", 1)
	b.closeNormally(t)
	m.await(t, "session ended", 2)
	if n := m.get("session started"); n != 2 {
		t.Errorf("%d sessions started, want 2", n)
	}
}

// Every refused or failed app handshake is counted once, with its reason.
func TestMetricsHandshakeRejections(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.MaxSessions = 1
	})
	dialApp(t, e.url, appOptions{})
	if _, ref, err := tryDialApp(t, e.url, appOptions{}); err == nil || ref.status != http.StatusServiceUnavailable {
		t.Fatalf("second app: %v (status %d), want 503", err, ref.status)
	}
	m.await(t, "rejected "+labels.RejectMaxSessions, 1)

	addr := e.url[len("ws://") : len(e.url)-1]
	plainHTTP(t, addr)
	m.await(t, "rejected "+labels.RejectBadRequest, 1)

	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Close() // gone before sending a request
	m.await(t, "rejected "+labels.RejectAborted, 1)

	gone := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) { return http.StatusNotFound, nil }})
	m2 := newCounts()
	e2 := newTether(t, gone.srv.URL(), func(o *proxy.Options) { o.Metrics = m2 })
	if _, ref, err := tryDialApp(t, e2.url, appOptions{}); err == nil || ref.status != http.StatusBadGateway {
		t.Fatalf("app behind a 404 upstream: %v (status %d), want 502", err, ref.status)
	}
	m2.await(t, "rejected "+labels.RejectUpstreamPermanent, 1)
	m2.await(t, "session ended", 1) // admitted, then let go
	if n := m.get("rejected " + labels.RejectUpstreamPermanent); n != 0 {
		t.Errorf("first server counted %d upstream_permanent rejections, want 0", n)
	}
}

// plainHTTP sends a request that is not a WebSocket upgrade and reads the
// answer.
func plainHTTP(t *testing.T, addr string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("plain GET: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("plain GET answered %d, want a refusal", resp.StatusCode)
	}
}

// The outbox depth is read from the sessions, so it follows queueing,
// dropping and flushing exactly; every dropped message is counted.
func TestMetricsOutbox(t *testing.T) {
	const capMessages, sent = 2, 5
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.OutboxMaxMessages = capMessages
		o.OutboxOverflow = buffer.OverflowDropOldest
	})
	a := dialApp(t, e.url, appOptions{})
	for i := range sent {
		a.sendText(t, fmt.Sprintf("m%d", i))
	}
	a.ping(t, "all queued")
	if n := e.srv.OutboxMessages(); n != capMessages {
		t.Errorf("OutboxMessages() = %d while the upstream is down, want %d", n, capMessages)
	}
	m.await(t, "outbox dropped", sent-capMessages)

	down.Store(false)
	c := up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("m%d", sent-2))
	up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("m%d", sent-1))
	eventually(t, "outbox empty", func() bool { return e.srv.OutboxMessages() == 0 })
}

// Under the close policy the refused message is counted as dropped.
func TestMetricsOutboxCloseCounts(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.OutboxMaxMessages = 1
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, "kept")
	a.sendText(t, "refused")
	a.expectClosed(t, testTimeout, 1013, "outbox full")
	m.await(t, "outbox dropped", 1)
}

// Shutdown marks the drain for metrics and logs its start and end with the
// number of sessions and how long it took; readiness fails from the start.
func TestMetricsDrain(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	core, logs := observer.New(zapcore.InfoLevel)
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.Logger = zap.New(core)
	})
	a := dialApp(t, e.url, appOptions{})
	up.nextConn(t)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx, 0); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	a.expectClosed(t, testTimeout, ws.StatusGoingAway, "tether shutting down")
	if n := m.get("drain started"); n != 1 {
		t.Errorf("DrainStarted called %d times, want 1", n)
	}
	started := logs.FilterMessage("drain started").All()
	finished := logs.FilterMessage("drain finished").All()
	if len(started) != 1 || len(finished) != 1 {
		t.Fatalf("%d \"drain started\" and %d \"drain finished\" lines, want 1 each", len(started), len(finished))
	}
	if n := started[0].ContextMap()["sessions"]; n != int64(1) {
		t.Errorf("drain started with sessions=%v, want 1", n)
	}
	fields := finished[0].ContextMap()
	if d, ok := fields["duration"].(time.Duration); !ok || d <= 0 || d > testTimeout {
		t.Errorf("drain finished with duration=%v, want a positive duration", fields["duration"])
	}
	if fields["sessions"] != int64(1) {
		t.Errorf("drain finished with sessions=%v, want 1", fields["sessions"])
	}
}

// What the app queued while the upstream was down and never reached an
// upstream connection, because the app left first, is counted and logged as
// dropped, not discarded in silence.
func TestUnsentOutboxCounted(t *testing.T) {
	const sent = 3
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	m := newCounts()
	core, logs := observer.New(zapcore.WarnLevel)
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.Logger = zap.New(core)
	})
	a := dialApp(t, e.url, appOptions{})
	for i := range sent {
		a.sendText(t, fmt.Sprintf("m%d", i))
	}
	a.ping(t, "all queued")
	a.closeNormally(t)
	m.await(t, "session ended", 1)
	if n := m.get("app dropped " + labels.DropUnsent); n != sent {
		t.Errorf("%d unsent messages counted, want %d", n, sent)
	}
	found := logs.FilterMessage("app left with messages never sent upstream, dropped").All()
	if len(found) != 1 || found[0].ContextMap()["messages"] != int64(sent) {
		t.Errorf("log lines %v, want one naming %d messages", found, sent)
	}
}
