package proxy_test

import (
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol/centrifuge"
)

// The session's side of the centrifuge preset's keepalive, against a
// scripted server: the app's pong ({}) goes to a connection only as the
// answer to that connection's ping. A Centrifugo server closes a
// connection with 3501 bad request, which ends the app's session, for a
// pong it did not ask for; the app sends one when it answers a ping of a
// lost connection, or tether's own ping of an outage, after the next
// connection is up (seen with the real centrifuge-js and centrifuge
// server in internal/interop, 2 runs in 12 at load 20). The real server
// runs in internal/interop.
func TestCentrifugePongOnlyAsked(t *testing.T) {
	m := newCounts()
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withProtocol(centrifuge.New(centrifuge.Options{}), m))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	const connect = `{"id":1,"connect":{"name":"js"}}`
	a.sendText(t, connect)
	up.expectFromApp(t, c.N(), ws.OpText, connect)
	serverSend(t, c.Send, `{"id":1,"connect":{"client":"c1","ping":25,"pong":true}}`)
	a.expectText(t, `{"id":1,"connect":{"client":"c1","ping":25,"pong":true}}`)
	awaitRestores(t, e, 1)

	// Asked: the pong goes upstream. Not asked: dropped, and the message
	// behind it is the next the server reads.
	ping(t, c.Send, a)
	a.sendText(t, `{}`)
	up.expectFromApp(t, c.N(), ws.OpText, `{}`)
	a.sendText(t, `{}`)
	a.sendText(t, `{"id":2,"rpc":{"method":"m"}}`)
	up.expectFromApp(t, c.N(), ws.OpText, `{"id":2,"rpc":{"method":"m"}}`)
	m.await(t, "app dropped keepalive", 1)

	// A ping of the connection lost before the app answered: the answer,
	// sent once the next connection is live, does not go to it; that
	// connection's own ping is answered.
	ping(t, c.Send, a)
	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, connect)
	serverSend(t, c.Send, `{"id":1,"connect":{"client":"c2","ping":25,"pong":true}}`)
	awaitRestores(t, e, 2)
	a.sendText(t, `{}`)
	a.sendText(t, `{"id":3,"rpc":{"method":"m"}}`)
	up.expectFromApp(t, c.N(), ws.OpText, `{"id":3,"rpc":{"method":"m"}}`)
	m.await(t, "app dropped keepalive", 2)
	ping(t, c.Send, a)
	a.sendText(t, `{}`)
	up.expectFromApp(t, c.N(), ws.OpText, `{}`)
}

func serverSend(t *testing.T, send func(string) error, msg string) {
	t.Helper()
	if err := send(msg); err != nil {
		t.Fatal(err)
	}
}

// ping sends the server's ping and a push behind it, and waits for the
// push: the session has then read the ping. The app may also get tether's
// own pings ({} as well) of an outage before it.
func ping(t *testing.T, send func(string) error, a *app) {
	t.Helper()
	const marker = `{"push":{"channel":"c","join":{"info":{}}}}`
	serverSend(t, send, `{}`)
	serverSend(t, send, marker)
	for {
		m := a.next(t)
		if string(m.data) == marker {
			return
		}
		if string(m.data) != `{}` {
			t.Fatalf("app got %q, want the ping and %s", m.data, marker)
		}
	}
}
