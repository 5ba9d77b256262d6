package proxy_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// With the upstream down (every handshake refused with 503), app messages
// queue up to TETHER_OUTBOX_MAX_MESSAGES, and the overflow policy decides
// what happens beyond (docs/design.md "Outbox and acknowledgements").
func TestOutboxOverflow(t *testing.T) {
	const capMessages, sent = 4, 10
	tests := []struct {
		policy buffer.Overflow
		want   []int // message numbers the upstream receives once it is back
	}{
		{buffer.OverflowDropOldest, []int{6, 7, 8, 9}},
		{buffer.OverflowDropNewest, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			var down atomic.Bool
			down.Store(true)
			up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
			e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
				o.OutboxMaxMessages = capMessages
				o.OutboxOverflow = tt.policy
			})
			a := dialApp(t, e.url, appOptions{})
			for i := range sent {
				a.sendText(t, fmt.Sprintf("m%d", i))
			}
			// tether reads the app in order: its pong proves every message
			// before the ping went through the outbox while still down.
			a.ping(t, "all queued")
			down.Store(false)

			c := up.nextConn(t)
			for _, i := range tt.want {
				up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("m%d", i))
			}
			// The next message the upstream reads is one sent now: nothing
			// else was kept.
			a.sendText(t, "marker")
			up.expectFromApp(t, c.N(), ws.OpText, "marker")
			a.expectOpen(t)
		})
	}
}

// Under the default policy, the message that does not fit closes the app with
// 1013 "outbox full"; up to the cap, the app stays connected.
func TestOutboxOverflowCloses(t *testing.T) {
	const capMessages = 4
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.OutboxMaxMessages = capMessages
		o.OutboxOverflow = buffer.OverflowClose
	})
	a := dialApp(t, e.url, appOptions{})
	for i := range capMessages {
		a.sendText(t, fmt.Sprintf("m%d", i))
	}
	a.ping(t, "all queued")
	a.expectOpen(t)

	a.sendText(t, "one too many")
	a.expectClosed(t, testTimeout, 1013, "outbox full")
	e.expectSessions(t, 0)
	if up.srv.Handshakes() == 0 {
		t.Fatal("tether never tried the upstream")
	}
}

// The byte cap applies as well as the message cap.
func TestOutboxByteCap(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.OutboxMaxBytes = 10
		o.OutboxOverflow = buffer.OverflowDropOldest
	})
	a := dialApp(t, e.url, appOptions{})
	for _, m := range []string{"aaaa", "bbbb", "cccc", "dd"} {
		a.sendText(t, m)
	}
	a.ping(t, "all queued")
	down.Store(false)
	c := up.nextConn(t)
	// 4+4+4 > 10: "aaaa" was evicted for "cccc"; "dd" fits beside it.
	for _, m := range []string{"bbbb", "cccc", "dd"} {
		up.expectFromApp(t, c.N(), ws.OpText, m)
	}
	a.sendText(t, "marker")
	up.expectFromApp(t, c.N(), ws.OpText, "marker")
}

// refuseWhile answers every handshake with 503 while down is set.
func refuseWhile(down *atomic.Bool) func(int) (int, http.Header) {
	return func(int) (int, http.Header) {
		if down.Load() {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}
}

// Messages the app sends while the first connection is being restored all
// arrive, in order: each one either joins the outbox before Restore drains it
// or goes straight to the live connection after, never into an outbox that
// Restore has already finished with.
func TestNoMessageStrandedAcrossRestore(t *testing.T) {
	const rounds, stream = 5, 2000
	for r := range rounds {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{quiet: true, refuse: func(n int) (int, http.Header) {
				if n == 1 {
					return http.StatusServiceUnavailable, nil
				}
				return 0, nil
			}})
			e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
				o.OutboxMaxMessages = stream
				o.Logger = quietLogger(t)
				// The upstream reads the burst slowly under -race; tether's
				// pings wait behind it.
				noHeartbeat(o)
			})
			a := dialApp(t, e.url, appOptions{})
			// The backoff (under backoffBase) ends while this loop runs.
			for i := range stream {
				a.sendText(t, fmt.Sprintf("s%d", i))
			}
			c := up.nextConn(t)
			for i := range stream {
				up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("s%d", i))
			}
		})
	}
}

// After a reconnect, a message sent before the loss and never acknowledged
// is re-sent before what the app queued during the outage: nothing the app
// sent later overtakes it (docs/design.md "Restore order"). The outbox used
// to go first, so the upstream read m2 before the re-send of m1.
func TestUnacknowledgedResentBeforeOutbox(t *testing.T) {
	var down atomic.Bool
	up := newUpstream(t, upstreamConfig{refuse: refuseWhile(&down)})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Rules = protocol.Rules{AckIDPath: mustPath(t, "id"), AckMatch: mustMatch(t, `{"t":"ack"}`)}
	})
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	a.sendText(t, msgText("m1"))
	up.expectFromApp(t, c.N(), ws.OpText, msgText("m1")) // and never acknowledged

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	a.sendText(t, msgText("m2"))
	// tether reads the app in order: its pong proves m2 went into the
	// outbox while the upstream refused every handshake.
	a.ping(t, "m2 queued")
	down.Store(false)

	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, msgText("m1"))
	up.expectFromApp(t, c.N(), ws.OpText, msgText("m2"))
}
