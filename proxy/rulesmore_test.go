package proxy_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// withRules sets the rules protocol's configuration.
func withRules(r protocol.Rules) func(*proxy.Options) {
	return func(o *proxy.Options) { o.Rules = r }
}

// downAfterFirst refuses every handshake after the first while down is set:
// an outage as long as the test wants.
func downAfterFirst(down *atomic.Bool) upstreamConfig {
	return upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n > 1 && down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}}
}

// TETHER_SUBSCRIPTION_END_MATCH: a subscription the server ended is not
// replayed on the next connection; the others are.
func TestRulesSubscriptionEnd(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		SubscribeMatch: mustMatch(t, `{"t":"sub"}`), UnsubscribeMatch: mustMatch(t, `{"t":"unsub"}`),
		SubscriptionKey:      mustPath(t, "channel"),
		SubscriptionEndMatch: mustMatch(t, `{"t":"end"}`),
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	for _, ch := range []string{"a", "b", "c"} {
		a.sendText(t, sub(ch))
		up.expectFromApp(t, 1, ws.OpText, sub(ch))
	}
	if err := c.Send(`{"t":"end","channel":"b"}`); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, `{"t":"end","channel":"b"}`) // the app sees the end itself

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, sub("a"))
	up.expectFromApp(t, c.N(), ws.OpText, sub("c"))
	a.sendText(t, "marker")
	up.expectFromApp(t, c.N(), ws.OpText, "marker")
	up.expectNothingFromApp(t)
}

// TETHER_APP_PING_MATCH and TETHER_APP_PONG_MESSAGE: while live the app's
// ping goes upstream and the upstream's pong back; while the upstream is
// down tether answers every ping at once and queues none, and a ping in
// flight on a lost connection is answered when the loss is seen.
func TestRulesAppPing(t *testing.T) {
	var down atomic.Bool
	up := newUpstream(t, downAfterFirst(&down))
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		AppPingMatch: mustMatch(t, `{"type":"ping"}`), AppPongMessage: []byte(`{"type":"pong"}`),
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	awaitRestores(t, e, 1)

	a.sendText(t, `{"type":"ping","n":1}`)
	up.expectFromApp(t, 1, ws.OpText, `{"type":"ping","n":1}`)
	if err := c.Send(`{"type":"pong","n":1}`); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, `{"type":"pong","n":1}`)
	a.sendText(t, `{"type":"ping","n":2}`) // in flight: the upstream never answers it
	up.expectFromApp(t, 1, ws.OpText, `{"type":"ping","n":2}`)

	down.Store(true)
	_ = c.Reset()
	a.expectText(t, `{"type":"pong"}`) // the answer to ping 2, which will never come
	e.states.await(t, upstream.StateLost)
	for range 3 {
		a.sendText(t, `{"type":"ping"}`)
		a.expectText(t, `{"type":"pong"}`)
	}

	down.Store(false)
	c = up.nextConn(t)
	awaitRestores(t, e, 2)
	a.sendText(t, "after")
	up.expectFromApp(t, c.N(), ws.OpText, "after") // no ping was queued
	up.expectNothingFromApp(t)
	select {
	case m := <-a.msgs:
		t.Fatalf("app got %q: a pong too many", m.data)
	default:
	}
}

// TETHER_APP_KEEPALIVE_MESSAGE every TETHER_APP_KEEPALIVE_INTERVAL while
// the upstream is down, and none while it is live.
func TestRulesAppKeepalive(t *testing.T) {
	const every = 50 * time.Millisecond
	var down atomic.Bool
	up := newUpstream(t, downAfterFirst(&down))
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		AppKeepaliveMessage: []byte("beat"), AppKeepaliveInterval: every,
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	awaitRestores(t, e, 1)
	expectNoBeat(t, a, 3*every)

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	for range 3 {
		expectBeat(t, a, every+slack)
	}
	down.Store(false)
	c = up.nextConn(t)
	awaitRestores(t, e, 2)
	if err := c.Send("live"); err != nil {
		t.Fatal(err)
	}
	// Beats decided before the connection went live may still arrive
	// before "live"; none after it.
	for {
		m := a.next(t)
		if string(m.data) == "live" {
			break
		}
		if string(m.data) != "beat" {
			t.Fatalf("app got %q, want beats then live", m.data)
		}
	}
	expectNoBeat(t, a, 3*every)
}

// TETHER_FRAMING=ndjson: the records of one message are read one by one,
// both ways: a login and a subscribe sent together are both remembered
// and replayed, and the upstream's packed replies reach the app one by one.
func TestRulesNDJSON(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		AuthMatch: mustMatch(t, `{"connect":{}}`), SubscribeMatch: mustMatch(t, `{"subscribe":{}}`),
		SubscriptionKey: mustPath(t, "subscribe.channel"),
		Framing:         protocol.FramingNDJSON,
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	connect, subA, subB := `{"id":1,"connect":{}}`, `{"id":2,"subscribe":{"channel":"a"}}`, `{"id":3,"subscribe":{"channel":"b"}}`
	a.sendText(t, connect+"\n"+subA+"\n"+subB)
	for _, m := range []string{connect, subA, subB} {
		up.expectFromApp(t, 1, ws.OpText, m)
	}
	replies := []string{`{"id":1,"connect":{"client":"x"}}`, `{"id":2,"subscribe":{}}`, `{"id":3,"subscribe":{}}`}
	if err := c.Send(strings.Join(replies, "\n")); err != nil {
		t.Fatal(err)
	}
	for _, r := range replies {
		a.expectText(t, r)
	}

	_ = c.Reset()
	c = up.nextConn(t)
	for _, m := range []string{connect, subA, subB} {
		up.expectFromApp(t, c.N(), ws.OpText, m)
	}
}

// TETHER_SUBSCRIBE_REPLAY: a subscription whose stream has delivered
// numbers is replayed as the template renders it, from the last one and in
// its epoch; one whose stream has none goes as the app sent it.
func TestRulesSubscribeReplay(t *testing.T) {
	var tmpl template.SubscribeReplay
	if err := tmpl.UnmarshalText([]byte(`{"t":"sub","channel":{{json .Stream}},"from":{{.LastSeq}},"epoch":{{json .Epoch}},"id":{{get .Message "id"}}}`)); err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withRules(protocol.Rules{
		SubscribeMatch: mustMatch(t, `{"t":"sub"}`), SubscriptionKey: mustPath(t, "channel"),
		SubscribeReplay: tmpl,
		SeqPath:         mustPath(t, "seq"), StreamPath: mustPath(t, "channel"), EpochPath: mustPath(t, "epoch"),
	}))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	subA, subB := `{"t":"sub","channel":"a","id":1}`, `{"t":"sub","channel":"b","id":2}`
	for _, s := range []string{subA, subB} {
		a.sendText(t, s)
		up.expectFromApp(t, 1, ws.OpText, s)
	}
	for _, m := range []string{`{"channel":"a","seq":1,"epoch":"E1"}`, `{"channel":"a","seq":2,"epoch":"E1"}`} {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
		a.expectText(t, m)
	}

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, `{"t":"sub","channel":"a","from":2,"epoch":"E1","id":1}`)
	up.expectFromApp(t, c.N(), ws.OpText, subB)
	// The server resumes a from 2: the repeat is dropped, 3 delivered.
	for _, m := range []string{`{"channel":"a","seq":2,"epoch":"E1"}`, `{"channel":"a","seq":3,"epoch":"E1"}`} {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	a.expectText(t, `{"channel":"a","seq":3,"epoch":"E1"}`)
}
