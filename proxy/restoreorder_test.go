package proxy_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// tether's own heartbeat message never goes before the login on a
// connection: a server that wants the login first (Centrifugo's connect)
// would refuse it. Until the login is out the probe is a WebSocket ping,
// which every server answers; then the heartbeat message. Checked on the
// first connection, where the app logs in later than several ping
// intervals, and on the next, where the restore sends the login.
func TestHeartbeatMessageNeverPrecedesLogin(t *testing.T) {
	const interval = 40 * time.Millisecond
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Rules = protocol.Rules{AuthMatch: mustMatch(t, `{"op":"login"}`)}
		o.Upstream.HeartbeatMessage = []byte("hb")
		o.Upstream.PingInterval, o.Upstream.PingTimeout = interval, testTimeout
	})
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	awaitRestores(t, e, 1)
	<-time.After(4 * interval) // several probes are due before the app logs in
	a.sendText(t, `{"op":"login"}`)
	up.expectFromApp(t, 1, ws.OpText, `{"op":"login"}`)
	up.expectFromApp(t, 1, ws.OpText, "hb")

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, `{"op":"login"}`)
	up.expectFromApp(t, c.N(), ws.OpText, "hb")
}

// TETHER_HIDE_ON_RECONNECT_MATCH with a key hides only the answers to
// tether's own replays, per key: the first acknowledgement of a second
// subscription on the first connection reaches the app (it waits for it),
// the acknowledgements of the replayed subscriptions after a reconnect do
// not, and one the app asks for again on the new connection does.
func TestHideOnReconnectPerKey(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		SubscribeMatch: mustMatch(t, `{"t":"sub"}`), UnsubscribeMatch: mustMatch(t, `{"t":"unsub"}`),
		SubscriptionKey:      mustPath(t, "channel"),
		HideOnReconnectMatch: mustMatch(t, `{"t":"subscribed"}`),
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	acked := func(ch string) string { return `{"t":"subscribed","channel":"` + ch + `"}` }
	for _, ch := range []string{"a", "b"} {
		a.sendText(t, sub(ch))
		up.expectFromApp(t, 1, ws.OpText, sub(ch))
		if err := c.Send(acked(ch)); err != nil {
			t.Fatal(err)
		}
		a.expectText(t, acked(ch))
	}

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, sub("a"))
	up.expectFromApp(t, c.N(), ws.OpText, sub("b"))
	awaitRestores(t, e, 2)
	for _, m := range []string{acked("a"), acked("b"), "after the replay"} {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	a.expectText(t, "after the replay")
	// The app subscribes again on the new connection: the answer is its own.
	for _, m := range []string{unsub("b"), sub("b"), sub("c")} {
		a.sendText(t, m)
		up.expectFromApp(t, c.N(), ws.OpText, m)
	}
	for _, ch := range []string{"b", "c"} {
		if err := c.Send(acked(ch)); err != nil {
			t.Fatal(err)
		}
		a.expectText(t, acked(ch))
	}
}

// A keyed unsubscribe the app sends while the upstream is down folds its
// subscribe away, and the reply the app waits for still comes: the server
// gets, once, on the next connection and before the replay log, the
// subscribe (when the app has not seen its answer, or to have something
// for the unsubscribe to end) and the unsubscribe, and the app gets every
// reply it is owed, and not the one to tether's own re-send.
func TestFoldedRequestsStillAnswered(t *testing.T) {
	var down atomic.Bool
	up := newUpstream(t, downAfterFirst(&down))
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		SubscribeMatch: mustMatch(t, `{"t":"sub"}`), UnsubscribeMatch: mustMatch(t, `{"t":"unsub"}`),
		SubscriptionKey: mustPath(t, "channel"), ReplyIDPath: mustPath(t, "id"),
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	req := func(op, ch string, id int) string { return fmt.Sprintf(`{"t":%q,"channel":%q,"id":%d}`, op, ch, id) }
	reply := func(id int) string { return fmt.Sprintf(`{"id":%d,"ok":true}`, id) }
	a.sendText(t, req("sub", "a", 1))
	up.expectFromApp(t, 1, ws.OpText, req("sub", "a", 1))
	if err := c.Send(reply(1)); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, reply(1))

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	for _, m := range []string{req("sub", "b", 2), req("unsub", "b", 3), req("unsub", "a", 4), req("sub", "b", 5), "queued"} {
		a.sendText(t, m)
	}
	// "queued" waits in the outbox: tether has read everything before it.
	eventually(t, "the app's messages read", func() bool { return e.srv.OutboxMessages() == 1 })
	down.Store(false)
	c = up.nextConn(t)
	sent := []string{req("sub", "b", 2), req("unsub", "b", 3), req("sub", "a", 1), req("unsub", "a", 4), req("sub", "b", 5), "queued"}
	for _, m := range sent {
		up.expectFromApp(t, c.N(), ws.OpText, m)
	}
	for _, id := range []int{2, 3, 1, 4, 5} {
		if err := c.Send(reply(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int{2, 3, 4, 5} {
		a.expectText(t, reply(id))
	}

	// Sent once: the next connection replays only what is subscribed.
	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, req("sub", "b", 5))
	a.sendText(t, "marker")
	up.expectFromApp(t, c.N(), ws.OpText, "marker")
	up.expectNothingFromApp(t)
}
