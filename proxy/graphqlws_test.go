package proxy_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The session's side of the graphql-ws preset, against a scripted upstream:
// the ended drop (protocol.App.IfActive), abandoned operations
// (protocol.App.AtMostOnce, Capabilities.Abandoned) and pings in flight on a
// lost connection (Keepalive.Answer, Upstream.KeepaliveReply). The real
// graphql-ws server and client run in internal/interop.

const (
	gqlInit = `{"type":"connection_init"}`
	gqlAck  = `{"type":"connection_ack"}`
	gqlPing = `{"type":"ping"}`
	gqlPong = `{"type":"pong"}`
)

func gqlSubscribe(id, query string) string {
	return `{"id":"` + id + `","type":"subscribe","payload":{"query":"` + query + `"}}`
}

func gqlComplete(id string) string { return `{"id":"` + id + `","type":"complete"}` }

// gqlLost is the message the app gets for an operation abandoned in flight.
func gqlLost(id string) string {
	return `{"id":"` + id + `","type":"error","payload":[{"message":"` + graphqlws.LostMessage + `"}]}`
}

// gqlServe records what the app sends, as record does, and acknowledges
// every connection_init: a restore waits for the ack (AwaitLogin).
func gqlServe(u *upstreamEnv, c *upstreamtest.Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if string(data) == gqlInit {
			if err := c.Send(gqlAck); err != nil {
				return
			}
		}
		select {
		case u.fromApp <- upMsg{conn: c.N(), op: op, data: string(data)}:
		case <-c.Done():
			return
		}
	}
}

// gqlTether is tether with the graphql-ws preset in front of a gqlServe
// upstream that refuses handshakes while down is set, and an app that has
// logged in (its one connection_ack seen).
func gqlTether(t *testing.T, m *counts, down *atomic.Bool) (*upstreamEnv, *tetherEnv, *app, *upstreamtest.Conn) {
	t.Helper()
	up := newUpstream(t, upstreamConfig{onConn: gqlServe, refuse: func(n int) (int, http.Header) {
		if down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Protocol = graphqlws.New(graphqlws.Options{})
		o.Metrics = m
	})
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	a.sendText(t, gqlInit)
	up.expectFromApp(t, c.N(), ws.OpText, gqlInit)
	a.expectText(t, gqlAck)
	return up, e, a, c
}

// An app complete for an operation the server ended is not sent upstream:
// dropped and counted "ended", the app stays open. One for an operation
// still active is sent, and neither operation is replayed after a reset.
func TestGraphQLWSEndedCompleteDropped(t *testing.T) {
	m := newCounts()
	var down atomic.Bool
	up, _, a, c := gqlTether(t, m, &down)

	ended, active := gqlSubscribe("ended", "subscription { countdown }"), gqlSubscribe("active", "subscription { ticks }")
	a.sendText(t, ended)
	up.expectFromApp(t, c.N(), ws.OpText, ended)
	a.sendText(t, active)
	up.expectFromApp(t, c.N(), ws.OpText, active)
	if err := c.Send(gqlComplete("ended")); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, gqlComplete("ended"))

	a.sendText(t, gqlComplete("ended"))
	m.await(t, "app dropped "+labels.DropEnded, 1)
	a.sendText(t, gqlComplete("active"))
	up.expectFromApp(t, c.N(), ws.OpText, gqlComplete("active")) // the ended one was not sent before it
	a.sendText(t, gqlComplete("active"))                         // a second complete: no longer active either
	m.await(t, "app dropped "+labels.DropEnded, 2)

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, gqlInit)
	marker := gqlSubscribe("marker", "subscription { ticks }")
	a.sendText(t, marker)
	up.expectFromApp(t, c.N(), ws.OpText, marker) // neither operation came back before it
	up.expectNothingFromApp(t)
}

// A query and a mutation in flight when their connection is lost are not
// sent again: the app gets the preset's error for each, in the order it
// started them, a later complete for either is dropped as ended, and a
// subscription on the same connection is replayed. A query started during
// the outage was never in flight: it is sent once when the upstream is back.
func TestGraphQLWSInFlightAbandoned(t *testing.T) {
	m := newCounts()
	var down atomic.Bool
	up, e, a, c := gqlTether(t, m, &down)

	sub, q, mut := gqlSubscribe("s", "subscription { ticks }"), gqlSubscribe("q", "{ hello }"), gqlSubscribe("m", "mutation { bump }")
	for _, msg := range []string{sub, q, mut} {
		a.sendText(t, msg)
		up.expectFromApp(t, c.N(), ws.OpText, msg)
	}
	down.Store(true)
	_ = c.Reset()
	a.expectText(t, gqlLost("q"))
	a.expectText(t, gqlLost("m"))
	if got := e.srv.RestoreCounters().Abandoned; got != 2 {
		t.Fatalf("RestoreCounters().Abandoned = %d, want 2", got)
	}
	e.states.await(t, upstream.StateLost)
	q2 := gqlSubscribe("q2", "query Q { hello }")
	a.sendText(t, q2)
	a.sendText(t, gqlComplete("q"))
	m.await(t, "app dropped "+labels.DropEnded, 1)

	down.Store(false)
	c = up.nextConn(t)
	for _, want := range []string{gqlInit, sub, q2} {
		up.expectFromApp(t, c.N(), ws.OpText, want)
	}
	marker := gqlSubscribe("marker", "subscription { ticks }")
	a.sendText(t, marker)
	up.expectFromApp(t, c.N(), ws.OpText, marker)
	up.expectNothingFromApp(t)
	// The marker may have been flushed by the restore, before it made the
	// connection live: only the restore counter says the restore is over.
	awaitRestores(t, e, 2)
	if got := e.srv.RestoreCounters().Abandoned; got != 2 {
		t.Fatalf("RestoreCounters().Abandoned = %d after the restore, want 2", got)
	}
}

// An app ping sent on a connection that is lost before the server's pong
// gets tether's pong: the client library's pong timeout would otherwise
// close the app. A ping the server answered is not answered again.
func TestGraphQLWSPingInFlightAnswered(t *testing.T) {
	m := newCounts()
	var down atomic.Bool
	up, e, a, c := gqlTether(t, m, &down)

	a.sendText(t, gqlPing)
	up.expectFromApp(t, c.N(), ws.OpText, gqlPing)
	if err := c.Send(gqlPong); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, gqlPong)
	a.sendText(t, gqlPing)
	up.expectFromApp(t, c.N(), ws.OpText, gqlPing) // in flight: no pong from the server
	_ = c.Reset()
	a.expectText(t, gqlPong)

	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, gqlInit)
	awaitRestores(t, e, 2) // live: the ping goes upstream, not answered by tether
	a.sendText(t, gqlPing)
	up.expectFromApp(t, c.N(), ws.OpText, gqlPing)
	if err := c.Send(gqlPong); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, gqlPong)
	_ = c.Reset() // the ping of this connection was answered
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, gqlInit)
	next := `{"id":"x","type":"next","payload":{"data":{"ticks":1}}}`
	if err := c.Send(next); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, next) // no second pong before it
}
