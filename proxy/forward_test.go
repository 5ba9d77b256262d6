package proxy_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Messages cross tether whole and with their type, in both directions, and
// tether answers the app's pings itself.
func TestForwarding(t *testing.T) {
	up := newUpstream(t, upstreamConfig{greeting: "welcome"})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)

	// Pushed by the upstream in the same segment as its 101: tether must not
	// lose it in the dialer's buffer.
	a.expectText(t, "welcome")

	t.Run("app to upstream", func(t *testing.T) {
		a.send(t, ws.OpText, "hello")
		up.expectFromApp(t, c.N(), ws.OpText, "hello")
		a.send(t, ws.OpBinary, "\x00\x01\xfe\xff")
		up.expectFromApp(t, c.N(), ws.OpBinary, "\x00\x01\xfe\xff")
		a.sendFragments(t, ws.OpText, "frag", "mented ", "by the app")
		up.expectFromApp(t, c.N(), ws.OpText, "fragmented by the app")
		a.sendFragments(t, ws.OpBinary, "\x00", "\x01")
		up.expectFromApp(t, c.N(), ws.OpBinary, "\x00\x01")
	})

	t.Run("upstream to app", func(t *testing.T) {
		sendOrFail(t, c.Send("text from upstream"))
		expectMsg(t, a, ws.OpText, "text from upstream")
		sendOrFail(t, c.SendBinary([]byte{0, 1, 0xfe, 0xff}))
		expectMsg(t, a, ws.OpBinary, "\x00\x01\xfe\xff")
		// Split inside a multi-byte rune: only the whole message must be UTF-8.
		long := strings.Repeat("fragmented upstream message é ", 20)
		sendOrFail(t, c.SendFragmented(long, 7))
		expectMsg(t, a, ws.OpText, long)
	})

	t.Run("app ping answered by tether", func(t *testing.T) {
		pingsBefore := c.Pings()
		a.ping(t, "are you there")
		// The upstream answers pings too, but the app's pong must not depend
		// on it: stop it answering and ping again.
		c.IgnorePings(true)
		a.ping(t, "still there")
		c.IgnorePings(false)
		// tether's heartbeat pings the upstream on its own schedule; the app's
		// two pings are not forwarded on top of it, which would need 2 in a
		// few milliseconds with pingInterval far longer.
		if d := c.Pings() - pingsBefore; d >= 2 {
			t.Errorf("upstream saw %d pings during the app's two, want the app's pings not forwarded", d)
		}
	})
	a.expectOpen(t)
}

// expectMsg checks op and content, and that tether sent the message as one
// frame (GOBWAS.md: naive apps cope better with unfragmented messages).
func expectMsg(t *testing.T, a *app, op ws.OpCode, data string) {
	t.Helper()
	m := a.next(t)
	if m.op != op || string(m.data) != data {
		t.Fatalf("app got %v %q, want %v %q", m.op, m.data, op, data)
	}
	if m.frames != 1 {
		t.Fatalf("app got %q in %d frames, want 1", data, m.frames)
	}
}

func sendOrFail(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("upstream send: %v", err)
	}
}

// The app gets the subprotocol the upstream chose from the app's offer.
func TestSubprotocol(t *testing.T) {
	tests := []struct {
		name      string
		offered   []string
		supported []string
		want      string
	}{
		{"second offer supported", []string{"a", "b"}, []string{"b"}, "b"},
		{"first offer preferred", []string{"a", "b"}, []string{"b", "a"}, "a"},
		{"none supported", []string{"a"}, []string{"b"}, ""},
		{"none offered", nil, []string{"b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{subprotocols: tt.supported})
			e := newTether(t, up.srv.URL(), nil)
			a := dialApp(t, e.url, appOptions{protocols: tt.offered})
			c := up.nextConn(t)
			if a.protocol != tt.want || c.Protocol() != tt.want {
				t.Fatalf("app got protocol %q, upstream negotiated %q; want %q for both",
					a.protocol, c.Protocol(), tt.want)
			}
			// The app offered one header line "a, b": tether passes each
			// token on, in the app's order.
			if h := up.handshake(t, 1); !slices.Equal(h.protocols, tt.offered) {
				t.Fatalf("upstream was offered %q, want the app's %q", h.protocols, tt.offered)
			}
			a.sendText(t, "x")
			up.expectFromApp(t, c.N(), ws.OpText, "x")
		})
	}
}

// TestSubprotocolPinnedWhileUpstreamDown: an app accepted before the upstream
// answered still gets a subprotocol back (Node's ws and browsers fail the
// connection otherwise): its first choice, and the upstream is then offered
// only that one, so both ends speak the same protocol.
func TestSubprotocolPinnedWhileUpstreamDown(t *testing.T) {
	up := newUpstream(t, upstreamConfig{
		subprotocols: []string{"b", "a"},
		refuse: func(n int) (int, http.Header) {
			if n == 1 {
				return http.StatusServiceUnavailable, nil
			}
			return 0, nil
		},
	})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{protocols: []string{"a", "b"}})
	if a.protocol != "a" {
		t.Fatalf("app accepted with protocol %q, want its first choice %q", a.protocol, "a")
	}
	if h := up.handshake(t, 1); !slices.Equal(h.protocols, []string{"a", "b"}) {
		t.Fatalf("first dial offered %q, want the app's list", h.protocols)
	}
	c := up.nextConn(t)
	if h := up.handshake(t, 2); !slices.Equal(h.protocols, []string{"a"}) {
		t.Fatalf("dial after the app was accepted offered %q, want only the pinned %q", h.protocols, "a")
	}
	if c.Protocol() != "a" {
		t.Fatalf("upstream negotiated %q, want %q", c.Protocol(), "a")
	}
	a.sendText(t, "x")
	up.expectFromApp(t, c.N(), ws.OpText, "x")
}

// closeFirstConn is an onConn that closes connection 1 with 1001 at once
// (a server restart) and records what the app sends on the others.
func closeFirstConn(u *upstreamEnv, c *upstreamtest.Conn) {
	if c.N() == 1 {
		_ = c.CloseWith(int(ws.StatusGoingAway), "restart")
		return
	}
	u.record(c)
}

// TestSubprotocolKeptAcrossReconnects: the app was accepted with the
// subprotocol the first connection chose ("b" of its "a, b"); every later
// dial offers only that one, so an upstream that would now prefer "a" still
// speaks "b" with the app.
func TestSubprotocolKeptAcrossReconnects(t *testing.T) {
	up := newUpstream(t, upstreamConfig{
		onConn: closeFirstConn,
		choose: func(n int, offered []string) string {
			if n == 1 {
				return "b"
			}
			return offered[0] // prefers "a" when offered
		},
	})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{protocols: []string{"a", "b"}})
	if a.protocol != "b" {
		t.Fatalf("app accepted with %q, want the first connection's %q", a.protocol, "b")
	}
	up.handshake(t, 1)
	if h := up.handshake(t, 2); !slices.Equal(h.protocols, []string{"b"}) {
		t.Fatalf("dial after the reconnect offered %q, want only the app's %q", h.protocols, "b")
	}
	a.sendText(t, "x")
	up.expectFromApp(t, 2, ws.OpText, "x")
	a.expectOpen(t)
}

// TestSubprotocolRefusedAfterReconnect: an upstream that no longer speaks
// the app's subprotocol (it accepts the reconnect without one) cannot serve
// the app, however often it is dialled: the app is closed with 1011 naming
// the subprotocol, after that one dial, so it can connect anew and
// negotiate with the upstream as it is now.
func TestSubprotocolRefusedAfterReconnect(t *testing.T) {
	up := newUpstream(t, upstreamConfig{
		onConn: closeFirstConn,
		choose: func(n int, offered []string) string {
			if n == 1 {
				return "b"
			}
			return ""
		},
	})
	e := newTether(t, up.srv.URL(), nil)
	a := dialApp(t, e.url, appOptions{protocols: []string{"a", "b"}})
	if a.protocol != "b" {
		t.Fatalf("app accepted with %q, want %q", a.protocol, "b")
	}
	a.expectClosed(t, testTimeout, ws.StatusInternalServerError,
		`upstream accepted without subprotocol "b", the one the app was accepted with`)
	if n := up.srv.Handshakes(); n != 2 {
		t.Errorf("upstream saw %d handshakes, want 2: the refusal is not retried", n)
	}
}

// TestBrokenCloseFrameIsPermanent: an upstream whose close frame breaks
// RFC 6455 (a reason that is not UTF-8) will send it again on every
// connection: tether does not reconnect, whatever the code, and tells the
// app with 1002 naming the problem and the upstream's code.
func TestBrokenCloseFrameIsPermanent(t *testing.T) {
	for _, code := range []ws.StatusCode{1003, ws.StatusNormalClosure} {
		t.Run(strconv.Itoa(int(code)), func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
				_ = c.CloseWith(int(code), "bad \xff\xfe reason")
			}})
			e := newTether(t, up.srv.URL(), nil)
			a := dialApp(t, e.url, appOptions{})
			a.expectClosed(t, testTimeout, ws.StatusProtocolError,
				fmt.Sprintf("upstream broke the WebSocket protocol: close reason is not UTF-8 (close code %d)", code))
			if n := up.srv.Handshakes(); n != 1 {
				t.Errorf("upstream saw %d handshakes, want 1: the broken close is not retried", n)
			}
		})
	}
}

// TestUnofferedSubprotocolIsPermanent: an upstream that answers with a
// subprotocol tether never offered breaks RFC 6455 §4.1 on every dial: the
// first dial answers the app's handshake 502, a later one closes the app
// with 1011; neither is redialled.
func TestUnofferedSubprotocolIsPermanent(t *testing.T) {
	t.Run("first dial", func(t *testing.T) {
		up := newUpstream(t, upstreamConfig{choose: func(int, []string) string { return "zzz" }})
		e := newTether(t, up.srv.URL(), nil)
		_, ref, err := tryDialApp(t, e.url, appOptions{protocols: []string{"a"}})
		if err == nil || ref.status != http.StatusBadGateway || !strings.Contains(ref.body, `chose a subprotocol that was not offered (offered ["a"])`) {
			t.Fatalf("app handshake: %v, status %d %q; want 502 naming the subprotocol", err, ref.status, ref.body)
		}
		if n := up.srv.Handshakes(); n != 1 {
			t.Errorf("upstream saw %d handshakes, want 1", n)
		}
	})
	t.Run("reconnect", func(t *testing.T) {
		up := newUpstream(t, upstreamConfig{
			onConn: closeFirstConn,
			choose: func(n int, _ []string) string {
				if n == 1 {
					return "a"
				}
				return "zzz"
			},
		})
		e := newTether(t, up.srv.URL(), nil)
		a := dialApp(t, e.url, appOptions{protocols: []string{"a"}})
		a.expectClosed(t, testTimeout, ws.StatusInternalServerError,
			`upstream chose a subprotocol that was not offered (offered ["a"])`)
		if n := up.srv.Handshakes(); n != 2 {
			t.Errorf("upstream saw %d handshakes, want 2", n)
		}
	})
}
