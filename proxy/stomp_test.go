package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol/stomp"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The session's side of the STOMP preset, against a scripted broker: frames
// split from one WebSocket message, the login replayed and its CONNECTED
// hidden, subscriptions keyed by id, receipts of replays hidden, receipted
// SENDs re-sent, ACKs of a lost connection dropped, and heart-beats toward
// the app while down at the negotiated interval. The real RabbitMQ and
// @stomp/stompjs run in internal/interop.

// stompBeat is the heart-beat interval of the scripted app and broker in
// TestSTOMPHeartbeats: tether beats toward the app whenever it has had
// nothing for that long.
const stompBeat = 100 * time.Millisecond

// stompLogin is the scripted app's CONNECT and the broker's CONNECTED.
type stompLogin struct{ connect, connected string }

var (
	stompBeating = newStompLogin(stompBeat)
	// stompQuiet negotiates no heart-beats, for the tests about something
	// else: a beat is due whenever the app has had nothing for stompBeat,
	// which a loaded machine takes between two messages of a restore (a
	// "\n" reached TestSTOMPRestore's app before the MESSAGE it expected,
	// at load 21).
	stompQuiet = newStompLogin(0)
)

func newStompLogin(every time.Duration) stompLogin {
	hb := fmt.Sprintf("heart-beat:%d,%d", every.Milliseconds(), every.Milliseconds())
	return stompLogin{
		connect:   "CONNECT\naccept-version:1.2\nhost:/\n" + hb + "\n\n\x00",
		connected: "CONNECTED\nversion:1.2\n" + hb + "\n\n\x00",
	}
}

func stompFrame(command string, headers ...string) string {
	return command + "\n" + strings.Join(headers, "\n") + "\n\n\x00"
}

// serve records the app's frames, one upMsg each as the preset splits
// them, and answers every CONNECT of l with its CONNECTED.
func (l stompLogin) serve(u *upstreamEnv, c *upstreamtest.Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if string(data) == l.connect {
			if err := c.Send(l.connected); err != nil {
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

// stompTether is tether with the STOMP preset in front of a broker serving
// l that refuses handshakes while down is set, and an app that has
// connected with l (its one CONNECTED seen).
func stompTether(t *testing.T, m *counts, down *atomic.Bool, l stompLogin) (*upstreamEnv, *tetherEnv, *app, *upstreamtest.Conn) {
	t.Helper()
	up := newUpstream(t, upstreamConfig{onConn: l.serve, refuse: func(int) (int, http.Header) {
		if down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withProtocol(stomp.New(), m))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	a.sendText(t, l.connect)
	up.expectFromApp(t, c.N(), ws.OpText, l.connect)
	a.expectText(t, l.connected)
	awaitRestores(t, e, 1) // live: what the app sends now goes straight upstream
	return up, e, a, c
}

// Subscriptions come back after a reset, keyed by id: the one the app
// unsubscribed does not, the RECEIPT of a replayed one is hidden, and the
// second CONNECTED is hidden too. Frames packed into one WebSocket message
// reach the broker one by one.
func TestSTOMPRestore(t *testing.T) {
	m := newCounts()
	var down atomic.Bool
	up, e, a, c := stompTether(t, m, &down, stompQuiet)

	subA := stompFrame("SUBSCRIBE", "id:a", "destination:/topic/a", "receipt:ra")
	subB := stompFrame("SUBSCRIBE", "id:b", "destination:/topic/b")
	unsubB := stompFrame("UNSUBSCRIBE", "id:b")
	a.sendText(t, subA+subB+"\n"+unsubB)
	up.expectFromApp(t, c.N(), ws.OpText, subA)
	up.expectFromApp(t, c.N(), ws.OpText, subB+"\n")
	up.expectFromApp(t, c.N(), ws.OpText, unsubB)
	receipt := stompFrame("RECEIPT", "receipt-id:ra")
	if err := c.Send(receipt); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, receipt)

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, stompQuiet.connect)
	up.expectFromApp(t, c.N(), ws.OpText, subA)
	if err := c.Send(receipt); err != nil { // the replay's: hidden
		t.Fatal(err)
	}
	awaitRestores(t, e, 2)
	msg := stompFrame("MESSAGE", "subscription:a", "message-id:1", "destination:/topic/a")
	if err := c.Send(msg); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, msg) // neither the second CONNECTED nor the RECEIPT before it
	marker := stompFrame("SEND", "destination:/queue/marker")
	a.sendText(t, marker)
	up.expectFromApp(t, c.N(), ws.OpText, marker) // b did not come back before it
	up.expectNothingFromApp(t)
}

// An ACK goes to the connection that delivered its MESSAGE; one for a
// message of a lost connection is dropped and counted as stale, on the
// next connection and while there is none. A SEND with a receipt not yet
// answered is re-sent on the next connection; one answered is not.
func TestSTOMPAcksAndReceipts(t *testing.T) {
	m := newCounts()
	var down atomic.Bool
	up, e, a, c := stompTether(t, m, &down, stompQuiet)

	msg := stompFrame("MESSAGE", "subscription:a", "message-id:m1", "ack:x1", "destination:/queue/a")
	if err := c.Send(msg); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, msg)
	ack := stompFrame("ACK", "id:x1")
	a.sendText(t, ack)
	up.expectFromApp(t, c.N(), ws.OpText, ack)
	answered, unanswered := stompFrame("SEND", "destination:/queue/q", "receipt:s1"), stompFrame("SEND", "destination:/queue/q", "receipt:s2")
	a.sendText(t, answered)
	up.expectFromApp(t, c.N(), ws.OpText, answered)
	if err := c.Send(stompFrame("RECEIPT", "receipt-id:s1")); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, stompFrame("RECEIPT", "receipt-id:s1"))
	msg2 := stompFrame("MESSAGE", "subscription:a", "message-id:m2", "ack:x2", "destination:/queue/a")
	if err := c.Send(msg2); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, msg2)
	a.sendText(t, unanswered)
	up.expectFromApp(t, c.N(), ws.OpText, unanswered)

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	a.sendText(t, stompFrame("ACK", "id:x2")) // while down
	m.await(t, "app dropped "+labels.DropStale, 1)
	down.Store(false)
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, stompQuiet.connect)
	up.expectFromApp(t, c.N(), ws.OpText, unanswered)
	awaitRestores(t, e, 2)
	a.sendText(t, stompFrame("NACK", "id:x2")) // on the next connection
	m.await(t, "app dropped "+labels.DropStale, 2)
	marker := stompFrame("SEND", "destination:/queue/marker")
	a.sendText(t, marker)
	up.expectFromApp(t, c.N(), ws.OpText, marker)
	up.expectNothingFromApp(t)
	a.expectOpen(t)
}

// The app gets a heart-beat whenever it has had nothing for the
// negotiated interval (its CONNECT's and the broker's CONNECTED's
// heart-beat headers): from a live broker that sends none, and while the
// broker is down, when its own heart-beats are answered, not queued.
func TestSTOMPHeartbeats(t *testing.T) {
	var down atomic.Bool
	up, e, a, c := stompTether(t, newCounts(), &down, stompBeating)

	expectBeats := func(n int, when string) {
		t.Helper()
		start := time.Now()
		for range n {
			if msg := a.next(t); string(msg.data) != "\n" {
				t.Fatalf("app got %q %s, want heart-beats", msg.data, when)
			}
		}
		if got, most := time.Since(start), time.Duration(n)*stompBeat+slack; got > most {
			t.Errorf("%d heart-beats %s took %v, want one every %v", n, when, got, stompBeat)
		}
	}
	a.sendText(t, "\n")
	up.expectFromApp(t, c.N(), ws.OpText, "\n") // live: to the broker
	expectBeats(3, "from a live, silent broker")
	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	expectBeats(4, "while the broker was down")
	a.sendText(t, "\n")
	if msg := a.next(t); string(msg.data) != "\n" {
		t.Fatalf("app's heart-beat answered with %q", msg.data)
	}
	down.Store(false)
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, stompBeating.connect)
	marker := stompFrame("SEND", "destination:/queue/marker")
	awaitRestores(t, e, 2)
	a.sendText(t, marker)
	up.expectFromApp(t, c.N(), ws.OpText, marker) // the heart-beat sent while down was not queued
}
