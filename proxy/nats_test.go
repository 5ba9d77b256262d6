package proxy_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol/nats"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The session's side of the NATS preset, against a scripted server that
// greets every connection with INFO, as nats-server does: operations
// packed into one WebSocket message sent one by one and replayed only as
// far as they are subscriptions, INFO shown once, the app's PING answered
// while the server is down. The real nats-server runs in internal/interop.

const natsInfo = `INFO {"server_id":"test","proto":1,"headers":true}` + "\r\n"

// natsServe greets the connection with INFO, then records the app's
// operations as record does.
func natsServe(u *upstreamEnv, c *upstreamtest.Conn) {
	if err := c.Send(natsInfo); err != nil {
		return
	}
	u.record(c)
}

func natsTether(t *testing.T, m *counts, down *atomic.Bool) (*upstreamEnv, *tetherEnv, *app, *upstreamtest.Conn) {
	t.Helper()
	up := newUpstream(t, upstreamConfig{onConn: natsServe, refuse: func(int) (int, http.Header) {
		if down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withProtocol(nats.New(), m))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	a.expectText(t, natsInfo)
	awaitRestores(t, e, 1) // live: what the app sends now goes straight upstream
	return up, e, a, c
}

// A message holding CONNECT, SUBs, an UNSUB and a PUB reaches the server
// operation by operation; after a reset the server gets the CONNECT and
// the subscriptions still active, the UNSUB with a maximum behind its SUB,
// and not the PUB; the new connection's INFO is hidden.
func TestNATSRestore(t *testing.T) {
	var down atomic.Bool
	up, e, a, c := natsTether(t, newCounts(), &down)

	const (
		connect = `CONNECT {"verbose":false,"protocol":1}` + "\r\n"
		sub1    = "SUB ticks 1\r\n"
		sub2    = "SUB gone 2\r\n"
		unsub2  = "UNSUB 2\r\n"
		sub3    = "SUB few 3\r\n"
		max3    = "UNSUB 3 5\r\n"
		pub     = "PUB ticks 5\r\nhe\r\no\r\n"
	)
	a.sendText(t, connect+sub1+sub2+pub+unsub2+sub3+max3)
	for _, op := range []string{connect, sub1, sub2, pub, unsub2, sub3, max3} {
		up.expectFromApp(t, c.N(), ws.OpText, op)
	}
	_ = c.Reset()
	c = up.nextConn(t)
	for _, op := range []string{connect, sub1, sub3, max3} {
		up.expectFromApp(t, c.N(), ws.OpText, op)
	}
	awaitRestores(t, e, 2)
	msg := "MSG ticks 1 2\r\nhi\r\n"
	if err := c.Send(msg); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, msg) // not the second INFO before it
	up.expectNothingFromApp(t)
}

// While the server is down the app's PING gets tether's PONG, and is not
// queued; a PING in flight on the lost connection is answered too.
func TestNATSPingWhileDown(t *testing.T) {
	var down atomic.Bool
	up, e, a, c := natsTether(t, newCounts(), &down)

	a.sendText(t, "PING\r\n")
	up.expectFromApp(t, c.N(), ws.OpText, "PING\r\n") // in flight: the server does not answer
	down.Store(true)
	_ = c.Reset()
	if m := a.next(t); string(m.data) != "PONG\r\n" || m.op != ws.OpBinary {
		t.Fatalf("the PING in flight answered with %v %q", m.op, m.data)
	}
	e.states.await(t, upstream.StateLost)
	a.sendText(t, "PING\r\n")
	if m := a.next(t); string(m.data) != "PONG\r\n" {
		t.Fatalf("a PING while down answered with %q", m.data)
	}
	down.Store(false)
	c = up.nextConn(t)
	awaitRestores(t, e, 2)
	pub := "PUB a 1\r\nx\r\n"
	a.sendText(t, pub)
	up.expectFromApp(t, c.N(), ws.OpText, pub) // no PING queued before it
}
