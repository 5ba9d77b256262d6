package upstream_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// refuse answers every handshake with status.
func refuse(status int) func(upstreamtest.Handshake) (int, http.Header) {
	return func(upstreamtest.Handshake) (int, http.Header) { return status, nil }
}

// TestRetryAfter: a 503 with Retry-After: 1 holds the next dial back at least
// one second, although the backoff alone would retry after 20ms.
func TestRetryAfter(t *testing.T) {
	hs := newHandshakeLog()
	hs.decide = func(h upstreamtest.Handshake) (int, http.Header) {
		if h.N == 1 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}
		}
		return 0, nil
	}
	srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: holdOpen})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	logs := observe(t, &opts)
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	var se *upstream.StatusError
	if !errors.As(first.Err, &se) || se.Status != http.StatusServiceUnavailable || se.RetryAfter != time.Second || first.Permanent {
		t.Fatalf("First() = %+v, want transient 503 with RetryAfter 1s", first)
	}
	if r := h.nextRestore(t); r.gen != 2 {
		t.Errorf("connected on gen %d, want 2", r.gen)
	}
	at := hs.times()
	gap := at[1].Sub(at[0])
	t.Logf("next handshake %v after the 503", gap)
	if gap < time.Second {
		t.Errorf("next handshake %v after Retry-After: 1, want ≥ 1s", gap)
	}
	if got := scheduledDelays(logs); len(got) != 1 || got[0] != time.Second {
		t.Errorf("scheduled delays %v, want [1s]", got)
	}
}

// TestTokenRotatedAfter401: the token file is re-read on every dial, trimmed;
// a rotated token heals a 401 without the Client giving up.
func TestTokenRotatedAfter401(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	writeFile(t, token, "old")
	hs := newHandshakeLog()
	hs.decide = func(h upstreamtest.Handshake) (int, http.Header) {
		if h.Header.Get("Authorization") == "Bearer new" {
			return 0, nil
		}
		// The kubelet rotates the projected token after our first refusal,
		// with the trailing newline such files often have.
		writeFile(t, token, "new\n")
		return http.StatusUnauthorized, nil
	}
	srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: holdOpen})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.TokenFile = token
	c := startClient(t, opts)

	if first := recv(t, c.First(), "first dial result"); first.Err == nil || first.Permanent {
		t.Fatalf("First() = %+v, want a transient 401", first)
	}
	if r := h.nextRestore(t); r.gen != 2 {
		t.Errorf("connected on gen %d, want 2", r.gen)
	}
	for i, want := range []string{"Bearer old", "Bearer new"} {
		if got := hs.header(i).Get("Authorization"); got != want {
			t.Errorf("handshake %d Authorization %q, want %q", i+1, got, want)
		}
	}
	if isClosed(c.Done()) {
		t.Errorf("Client stopped: %v", c.Err())
	}
}

// TestAuthFailuresMax: a server refusing every credential stops the Client
// after exactly AuthFailuresMax handshakes, with the reason the app will see.
func TestAuthFailuresMax(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := newServer(t, upstreamtest.Options{Handshake: refuse(status)})
			opts := testOptions(t, srv.URL(), newHandler())
			opts.AuthFailuresMax = 3
			c := startClient(t, opts)

			if first := recv(t, c.First(), "first dial result"); first.Permanent {
				t.Errorf("First() = %+v, want not permanent (credentials may rotate)", first)
			}
			waitClosed(t, c.Done(), "Client stop")
			err := c.Err()
			if !errors.Is(err, upstream.ErrAuthFailed) {
				t.Errorf("Err() = %v, want ErrAuthFailed", err)
			}
			if want := fmt.Sprintf("(HTTP %d)", status); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Err() = %v, want it to contain %q", err, want)
			}
			if n := srv.Handshakes(); n != opts.AuthFailuresMax {
				t.Errorf("%d handshakes, want exactly %d", n, opts.AuthFailuresMax)
			}
		})
	}
}

// TestFirstDialPermanent: a 404 on the first dial is reported as permanent
// (the app's handshake gets a 502) and stops the Client.
func TestFirstDialPermanent(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{Handshake: refuse(http.StatusNotFound)})
	c := startClient(t, testOptions(t, srv.URL(), newHandler()))

	first := recv(t, c.First(), "first dial result")
	var se *upstream.StatusError
	if !first.Permanent || !errors.As(first.Err, &se) || se.Status != http.StatusNotFound {
		t.Fatalf("First() = %+v, want permanent 404", first)
	}
	waitClosed(t, c.Done(), "Client stop")
	if err := c.Err(); !errors.Is(err, upstream.ErrPermanent) || !errors.As(err, &se) {
		t.Errorf("Err() = %v, want ErrPermanent wrapping the 404", err)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
}

// TestFirstDialRefused: nothing listening is transient: First says so and
// the Client keeps dialing.
func TestFirstDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	st := newStates()
	opts := testOptions(t, "ws://"+addr+"/", newHandler())
	opts.OnState = st.record
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	if first.Err == nil || first.Permanent {
		t.Fatalf("First() = %+v, want a transient error", first)
	}
	for range 3 { // three more dials after the first
		st.waitFor(t, upstream.StateWaiting)
		st.waitFor(t, upstream.StateConnecting)
	}
	if isClosed(c.Done()) {
		t.Errorf("Client stopped: %v", c.Err())
	}
}

// TestMaxAttempts: with MaxAttempts 3 and a server answering 503, the Client
// gives up after exactly 3 attempts.
func TestMaxAttempts(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{Handshake: refuse(http.StatusServiceUnavailable)})
	opts := testOptions(t, srv.URL(), newHandler())
	opts.MaxAttempts = 3
	c := startClient(t, opts)

	if first := recv(t, c.First(), "first dial result"); first.Permanent {
		t.Errorf("First() = %+v, want transient", first)
	}
	waitClosed(t, c.Done(), "Client stop")
	var se *upstream.StatusError
	if err := c.Err(); !errors.Is(err, upstream.ErrGaveUp) || !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Errorf("Err() = %v, want ErrGaveUp wrapping the 503", err)
	}
	if n := srv.Handshakes(); n != opts.MaxAttempts {
		t.Errorf("%d handshakes, want %d", n, opts.MaxAttempts)
	}
}

// TestHeadersAndToken: static headers and the bearer token reach the server;
// no log line, at any level, holds the token.
func TestHeadersAndToken(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	token := filepath.Join(t.TempDir(), "token")
	writeFile(t, token, "  "+secret+"\n")
	hs := newHandshakeLog()
	hs.decide = func(h upstreamtest.Handshake) (int, http.Header) {
		if h.N == 1 {
			return http.StatusUnauthorized, nil // logged as a failed dial
		}
		return 0, nil
	}
	srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: func(c *upstreamtest.Conn) {
		if c.N() == 1 {
			_ = c.CloseWith(4001, "reauth") // logged as a loss
			return
		}
		holdOpen(c)
	}})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.TokenFile = token
	opts.Header = http.Header{"X-Tenant": {"acme"}, "X-Trace": {"a", "b"}}
	logs := observe(t, &opts)
	c := startClient(t, opts)

	if lost := h.nextLost(t); lost.gen != 2 { // gen 1 was the 401
		t.Errorf("Lost on gen %d, want 2", lost.gen)
	}
	h.nextRestore(t) // gen 2
	if r := h.nextRestore(t); r.gen != 3 {
		t.Errorf("Restore on gen %d, want 3", r.gen)
	}
	got := hs.header(2)
	if got.Get("X-Tenant") != "acme" || strings.Join(got.Values("X-Trace"), ",") != "a,b" {
		t.Errorf("server saw headers %v, want X-Tenant: acme and X-Trace: a, b", got)
	}
	if auth := got.Get("Authorization"); auth != "Bearer "+secret {
		t.Errorf("server saw Authorization %q, want the trimmed token", auth)
	}
	if opts.Header.Get("Authorization") != "" {
		t.Error("the Client wrote the token into the caller's Header")
	}
	c.Close()
	entries := logs.All()
	if len(entries) < 3 {
		t.Fatalf("only %d log entries: the check below would prove nothing", len(entries))
	}
	for _, e := range entries {
		if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, secret) {
			t.Errorf("log entry holds the token: %s", line)
		}
	}
}

// TestFirstDialBadURL: a URL no retry can fix (docs/design.md lists "bad URL"
// among the permanent failures) stops the Client at once, and the error
// logged does not repeat the URL's credentials.
func TestFirstDialBadURL(t *testing.T) {
	const secret = "hunter2"
	for _, url := range []string{
		"http://u:" + secret + "@127.0.0.1:1/",
		"ws://u:" + secret + "@127.0.0.1:1/%zz",
		"ws:///feed?token=" + secret,
		"u:" + secret + "@127.0.0.1:1",
	} {
		t.Run(url, func(t *testing.T) {
			opts := testOptions(t, url, newHandler())
			logs := observe(t, &opts)
			c := startClient(t, opts)
			if first := recv(t, c.First(), "first dial result"); first.Err == nil || !first.Permanent {
				t.Fatalf("First() = %+v, want a permanent error", first)
			}
			waitClosed(t, c.Done(), "Client stop")
			if err := c.Err(); !errors.Is(err, upstream.ErrPermanent) {
				t.Errorf("Err() = %v, want ErrPermanent", err)
			}
			for _, e := range logs.All() {
				if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, secret) {
					t.Errorf("log entry holds the URL's credentials: %s", line)
				}
			}
		})
	}
}

// silent listens on 127.0.0.1:0, accepts TCP connections and never answers
// them: a handshake that hangs. accepted receives one value per connection.
func silent(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c)
			ch <- struct{}{}
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return "ws://" + ln.Addr().String() + "/", ch
}

// TestDialTimeout: a handshake that never gets an answer fails after
// DialTimeout, as a transient error.
func TestDialTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	url, _ := silent(t)
	opts := testOptions(t, url, newHandler())
	opts.DialTimeout = timeout
	start := time.Now()
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	took := time.Since(start)
	if first.Err == nil || first.Permanent {
		t.Fatalf("First() = %+v, want a transient error", first)
	}
	if took < timeout || took > timeout+slack {
		t.Errorf("first dial failed after %v, want in [%v, %v]", took, timeout, timeout+slack)
	}
}

// TestCloseDuringDial: Close interrupts a hanging handshake at once.
func TestCloseDuringDial(t *testing.T) {
	url, accepted := silent(t)
	opts := testOptions(t, url, newHandler())
	opts.DialTimeout = time.Minute
	c := startClient(t, opts)

	recv(t, accepted, "connection") // the handshake is now waiting for an answer
	start := time.Now()
	c.Close()
	if took := time.Since(start); took >= slack {
		t.Errorf("Close during a hanging handshake took %v, want < %v", took, slack)
	}
	if first := recv(t, c.First(), "first dial result"); first.Err == nil {
		t.Errorf("First() = %+v after Close during the dial, want an error", first)
	}
}

// TestMaxAttemptsAfterLoss: losing a confirmed connection is not itself a
// failed attempt. With MaxAttempts 2, a confirmed connection that is reset and
// then refused gets exactly two reconnect dials before the Client gives up.
func TestMaxAttemptsAfterLoss(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			if h.N == 1 {
				return 0, nil
			}
			return http.StatusServiceUnavailable, nil
		},
		OnConn: func(c *upstreamtest.Conn) {
			_ = c.Send(`{"t":"hello"}`)
			if _, _, err := c.Read(c.Context()); err == nil {
				_ = c.Reset()
			}
		},
	})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.Confirm = func(b []byte) bool { return string(b) == `{"t":"hello"}` }
	opts.MaxAttempts = 2
	c := startClient(t, opts)

	restored := h.nextRestore(t)
	h.nextMessage(t) // the hello: the connection is confirmed
	if err := restored.conn.SendText(context.Background(), []byte("drop me")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c.Done(), "Client stop")
	if err := c.Err(); !errors.Is(err, upstream.ErrGaveUp) {
		t.Errorf("Err() = %v, want ErrGaveUp", err)
	}
	if n := srv.Handshakes(); n != 1+opts.MaxAttempts {
		t.Errorf("%d handshakes, want the first one plus %d reconnect attempts", n, opts.MaxAttempts)
	}
}

// TestUserinfoBasicAuth: credentials in the URL's userinfo are sent as
// Basic auth, by a WebSocket upstream's handshake as by an SSE upstream's
// request, percent-decoded, a bare user name as user name with an empty
// password (https://TOKEN@host); an Authorization header the Client sets
// itself (the token file) wins over them.
func TestUserinfoBasicAuth(t *testing.T) {
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, userinfo, token, want string
	}{
		{"user and password", "alice:s3cret%21", "", basic("alice", "s3cret!")},
		{"bare user name", "TOKEN", "", basic("TOKEN", "")},
		{"token file wins", "alice:s3cret", "bearer-token", "Bearer bearer-token"},
	}
	for _, kind := range []upstream.Kind{upstream.KindWebSocket, upstream.KindSSE} {
		for _, tt := range tests {
			t.Run(kind.String()+"/"+tt.name, func(t *testing.T) {
				var auth func() string
				var rawURL string
				if kind == upstream.KindSSE {
					srv := newSSEServer(t, ssetest.Options{})
					auth = func() string { return waitRequests(t, srv, 1)[0].Header.Get("Authorization") }
					rawURL = srv.URL()
				} else {
					hs := newHandshakeLog()
					srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: holdOpen})
					auth = func() string { hs.waitN(t, 1); return hs.header(0).Get("Authorization") }
					rawURL = srv.URL()
				}
				scheme, rest, _ := strings.Cut(rawURL, "://")
				opts := testOptions(t, scheme+"://"+tt.userinfo+"@"+rest, newHandler())
				opts.Kind = kind
				if tt.token != "" {
					opts.TokenFile = filepath.Join(t.TempDir(), "token")
					writeFile(t, opts.TokenFile, tt.token)
				}
				startClient(t, opts)
				if got := auth(); got != tt.want {
					t.Errorf("upstream saw Authorization %q, want %q", got, tt.want)
				}
			})
		}
	}
}
