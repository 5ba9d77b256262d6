package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The upstream refuses the first handshake with 503 and Retry-After: the app
// is accepted anyway, what it sends meanwhile waits in the outbox, and tether
// waits at least as long as the server asked before dialling again.
func TestRetryAfterHonoured(t *testing.T) {
	const retryAfter = time.Second // the header's unit is seconds
	up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n == 1 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), nil)

	start := time.Now()
	a := dialApp(t, e.url, appOptions{})
	// A transient refusal answers the first dial at once; tether does not
	// hold the app for the rest of AcceptWait.
	within(t, "app accepted", time.Since(start), 0, acceptWait+slack)
	for i := range 5 {
		a.sendText(t, fmt.Sprintf("queued %d", i))
	}

	c := up.nextConn(t)
	first := up.handshake(t, 1)
	if gap := up.handshake(t, 2).at.Sub(first.at); gap < retryAfter {
		t.Errorf("second dial %v after the 503, want at least Retry-After %v", gap, retryAfter)
	}
	for i := range 5 {
		up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("queued %d", i))
	}
	a.sendText(t, "live")
	up.expectFromApp(t, c.N(), ws.OpText, "live")
	a.expectOpen(t)
}

// The first dial hangs (the network swallows the handshake): the app is
// accepted when AcceptWait runs out, not before, and its messages are sent
// once the upstream answers.
func TestAcceptedAfterAcceptWait(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	fp := newFaultProxy(t, up.srv.Addr())
	fp.Blackhole(true)
	e := newTether(t, fp.URL(), nil)

	start := time.Now()
	a := dialApp(t, e.url, appOptions{})
	within(t, "app accepted", time.Since(start), acceptWait, acceptWait+slack)
	for i := range 3 {
		a.sendText(t, fmt.Sprintf("queued %d", i))
	}
	// The held handshake goes through now, within DialTimeout.
	fp.Blackhole(false)
	c := up.nextConn(t)
	for i := range 3 {
		up.expectFromApp(t, c.N(), ws.OpText, fmt.Sprintf("queued %d", i))
	}
	sendOrFail(t, c.Send("hello app"))
	a.expectText(t, "hello app")
	a.expectOpen(t)
}

// An upstream that refuses the credentials every time: after AuthFailuresMax
// consecutive 401s the app is closed with 1008 and the reason docs/design.md fixes.
func TestAuthFailuresCloseApp(t *testing.T) {
	const maxFailures = 3
	up := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) {
		return http.StatusUnauthorized, nil
	}})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Upstream.AuthFailuresMax = maxFailures
	})
	a := dialApp(t, e.url, appOptions{}) // a 401 is not permanent: accepted
	a.expectClosed(t, testTimeout, ws.StatusPolicyViolation, "upstream rejected credentials (HTTP 401)")
	if n := up.srv.Handshakes(); n != maxFailures {
		t.Errorf("upstream saw %d handshakes, want AuthFailuresMax = %d", n, maxFailures)
	}
	e.expectSessions(t, 0)
}

// A permanent close code from the upstream reaches the app unchanged, and
// tether does not reconnect. No heartbeat: a pong later than PingTimeout on
// a loaded machine would end the first connection before the app's message
// reached it, and the second connection would close with 1008 instead.
func TestPermanentCloseCodePassedToApp(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: func(u *upstreamEnv, c *upstreamtest.Conn) {
		// Refuse the first thing the app says.
		if _, _, err := c.Read(c.Context()); err == nil {
			_ = c.CloseWith(1008, "bad request")
		}
	}})
	e := newTether(t, up.srv.URL(), noHeartbeat)
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, "something the server dislikes")
	a.expectClosed(t, testTimeout, ws.StatusPolicyViolation, "bad request")
	// The client stopped before the app was closed, so no dial can follow.
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1: a permanent code must not reconnect", n)
	}
	e.expectSessions(t, 0)
}

// A permanent HTTP answer to the first dial refuses the app's handshake with
// 502 and says why in one line.
func TestPermanentFirstDialRefusesApp(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) { return status, nil }})
			e := newTether(t, up.srv.URL(), nil)
			_, ref, err := tryDialApp(t, e.url, appOptions{})
			if err == nil {
				t.Fatal("app handshake succeeded, want HTTP 502")
			}
			if ref.status != http.StatusBadGateway {
				t.Fatalf("app handshake answered %d (%v), want 502", ref.status, err)
			}
			body := strings.TrimSuffix(ref.body, "\n")
			if body == "" || strings.ContainsAny(body, "\r\n") {
				t.Fatalf("502 body %q, want one non-empty line", ref.body)
			}
			if !strings.Contains(body, fmt.Sprint(status)) {
				t.Errorf("502 body %q does not name the upstream's status %d", body, status)
			}
			if n := up.srv.Handshakes(); n != 1 {
				t.Errorf("upstream saw %d handshakes, want 1", n)
			}
			e.expectSessions(t, 0)
		})
	}
}

// A transient first failure is not a refusal: 5xx, 429 and 408 let the app in.
func TestTransientFirstDialAcceptsApp(t *testing.T) {
	for _, status := range []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
				if n == 1 {
					return status, nil
				}
				return 0, nil
			}})
			e := newTether(t, up.srv.URL(), nil)
			a := dialApp(t, e.url, appOptions{})
			a.sendText(t, "hi")
			c := up.nextConn(t)
			up.expectFromApp(t, c.N(), ws.OpText, "hi")
			a.expectOpen(t)
		})
	}
}

// rawUpstream answers every connection's first request with answer, as is,
// then closes it: an upstream no test server would be (a reason phrase of
// any length and content).
func rawUpstream(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			_ = nc.SetDeadline(time.Now().Add(testTimeout))
			_, _ = http.ReadRequest(bufio.NewReader(nc))
			_, _ = io.WriteString(nc, answer)
			_ = nc.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return "ws://" + ln.Addr().String() + "/"
}

// The 502 body is cut to its bound at a character boundary: an upstream's
// reason in any language stays valid UTF-8 under charset=utf-8.
func TestRefusalBodyCutAtRuneBoundary(t *testing.T) {
	reason := strings.Repeat("é", 200) // 400 bytes: longer than the body's bound
	url := rawUpstream(t, "HTTP/1.1 404 "+reason+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	e := newTether(t, url, nil)
	_, ref, err := tryDialApp(t, e.url, appOptions{})
	if err == nil || ref.status != http.StatusBadGateway {
		t.Fatalf("app handshake: %v, status %d; want 502", err, ref.status)
	}
	body := strings.TrimSuffix(ref.body, "\n")
	if !utf8.ValidString(body) || len(body) > 300 || !strings.Contains(body, "éé") {
		t.Errorf("502 body (%d bytes) %q, want at most 300 bytes of valid UTF-8 quoting the reason", len(body), body)
	}
}
