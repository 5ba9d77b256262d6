package upstream_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/proxydial"
	"github.com/tetherproxy/tether/internal/proxytest"
	"github.com/tetherproxy/tether/internal/sse/ssetest"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The proxy tests run every upstream request through tinyproxy
// (internal/proxytest), a real forward proxy, with Options.Proxy set as
// TETHER_UPSTREAM_PROXY sets it: for every URL, loopback ones included.

// portOf is the port of a host:port or of a URL's host.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// always is a ProxyFunc choosing proxy for every request.
func always(proxy *url.URL) upstream.ProxyFunc {
	return func(*url.URL) (*url.URL, error) { return proxy, nil }
}

// tunnels counts the CONNECT requests for addr in the proxy's log.
func tunnels(p *proxytest.Proxy, addr string) int {
	n := 0
	for _, r := range p.Requests() {
		if strings.HasPrefix(r, "CONNECT "+addr+" ") {
			n++
		}
	}
	return n
}

// requireTunnels fails unless the proxy tunnelled exactly n connections to addr.
func requireTunnels(t *testing.T, p *proxytest.Proxy, addr string, n int) {
	t.Helper()
	if got := tunnels(p, addr); got != n {
		t.Fatalf("proxy logged %d CONNECT requests to %s, want %d; its requests: %q", got, addr, n, p.Requests())
	}
}

// TestProxyTunnelsWebSocket: ws:// and wss:// upstreams are reached through
// a CONNECT tunnel of a real proxy, with and without proxy credentials; the
// credentials go to the proxy only, never to the upstream.
func TestProxyTunnelsWebSocket(t *testing.T) {
	serverTLS, caPEM, err := upstreamtest.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		tls        bool
		user, pass string
	}{
		{name: "ws"},
		{name: "wss", tls: true},
		{name: "ws with credentials", user: "alice", pass: "s3cret"},
		{name: "wss with credentials", tls: true, user: "alice", pass: "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHandshakeLog()
			opts := upstreamtest.Options{Handshake: hs.handshake} // echo
			if tc.tls {
				opts.TLS = serverTLS
			}
			srv := newServer(t, opts)
			proxy := proxytest.Start(t, proxytest.Options{User: tc.user, Password: tc.pass, ConnectPorts: []int{portOf(t, srv.Addr())}})

			h := newHandler()
			h.restore = func(ctx context.Context, c *upstream.Conn) error { return c.SendText(ctx, []byte("through the proxy")) }
			copts := testOptions(t, srv.URL(), h)
			copts.Proxy = always(proxy.URL())
			if tc.tls {
				copts.TLSConfig = trusting(t, caPEM)
			}
			c := startClient(t, copts)
			if first := recv(t, c.First(), "first dial result"); first.Err != nil {
				t.Fatalf("first dial: %v", first.Err)
			}
			if m := h.nextMessage(t); m.data != "through the proxy" {
				t.Fatalf("message %q, want the echo", m.data)
			}
			requireTunnels(t, proxy, srv.Addr(), 1)
			for name := range hs.header(0) {
				if strings.HasPrefix(strings.ToLower(name), "proxy-") {
					t.Errorf("the upstream saw the proxy header %s", name)
				}
			}
		})
	}
}

// trusting is a TLS config whose only root is the PEM certificate ca.
func trusting(t *testing.T, ca []byte) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the PEM")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// TestProxyRejectsCredentials: a proxy's refusal of the credentials is its
// own failure, named as such and labelled proxy_auth, never quoting the
// password; it follows the credentials policy, so AuthFailuresMax answers
// in a row end the Client with ErrAuthFailed. tinyproxy answers a CONNECT
// without credentials with 407, and one with wrong credentials with 401.
func TestProxyRejectsCredentials(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	proxy := proxytest.Start(t, proxytest.Options{User: "alice", Password: "s3cret", ConnectPorts: []int{portOf(t, srv.Addr())}})
	for _, tc := range []struct {
		name, user, pass, want string
	}{
		{"wrong password", "alice", "hunter2", "proxy rejected credentials (HTTP 401)"},
		{"no credentials", "", "", "proxy requires credentials (HTTP 407)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			opts := testOptions(t, srv.URL(), newHandler())
			opts.Proxy = always(proxy.URLWith(tc.user, tc.pass))
			opts.Observer = rec
			logs := observe(t, &opts)
			c := startClient(t, opts)

			first := recv(t, c.First(), "first dial result")
			var pe *proxydial.Error
			if !errors.As(first.Err, &pe) || pe.Status == 0 || first.Permanent {
				t.Fatalf("first dial = %+v, want a transient *proxydial.Error with the proxy's status", first)
			}
			if !strings.Contains(first.Err.Error(), tc.want) {
				t.Errorf("first dial error %q, want it to say %q", first.Err, tc.want)
			}
			rec.expect(t, "dialed proxy_auth", "dialed proxy_auth", "dialed proxy_auth")
			waitClosed(t, c.Done(), "Client stop after AuthFailuresMax 407s")
			err := c.Err()
			if !errors.Is(err, upstream.ErrAuthFailed) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Err() = %v, want ErrAuthFailed reading %q", err, tc.want)
			}
			if srv.Handshakes() != 0 {
				t.Errorf("the upstream saw %d handshakes, want none", srv.Handshakes())
			}
			for _, e := range logs.All() {
				for k, v := range e.ContextMap() {
					if s, ok := v.(string); ok && (strings.Contains(s, "s3cret") || strings.Contains(s, "hunter2")) {
						t.Errorf("log %q field %s holds the password: %q", e.Message, k, s)
					}
				}
			}
		})
	}
}

// TestProxyDown: a proxy that is down is a transient failure, retried with
// backoff and labelled proxy; when the proxy comes back, the next attempt
// goes through it.
func TestProxyDown(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) { _ = c.Send("hello"); holdOpen(c) }})
	proxy := proxytest.Start(t, proxytest.Options{ConnectPorts: []int{portOf(t, srv.Addr())}})
	proxy.Stop()

	rec := newRecorder()
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.Proxy = always(proxy.URL())
	opts.Observer = rec
	logs := observe(t, &opts)
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	var pe *proxydial.Error
	if !errors.As(first.Err, &pe) || pe.Status != 0 || first.Permanent || pe.Addr != proxy.Addr() {
		t.Fatalf("first dial = %+v, want a transient *proxydial.Error naming %s", first, proxy.Addr())
	}
	rec.expect(t, "dialed proxy", "dialed proxy", "dialed proxy")
	if d := scheduledDelays(logs); len(d) < 2 || d[0] != backoffBase || d[1] != 2*backoffBase {
		t.Fatalf("backoff delays %v, want %v then %v", d, backoffBase, 2*backoffBase)
	}
	proxy.Restart(t)
	for {
		if o := recv(t, rec.ch, "a dial through the restarted proxy"); o.label == "ok" {
			break
		} else if o.label != "proxy" {
			t.Fatalf("dial result %q while the proxy was restarting, want proxy or ok", o.label)
		}
	}
	if m := h.nextMessage(t); m.data != "hello" {
		t.Fatalf("message %q, want hello", m.data)
	}
	requireTunnels(t, proxy, srv.Addr(), 1)
	if c.Err() != nil {
		t.Fatalf("Err() = %v, want the Client still running", c.Err())
	}
}

// TestProxyUpstreamReset: an upstream that resets its connection is reached
// again through the proxy, with a new tunnel; a port the proxy does not
// allow is its refusal, transient.
func TestProxyUpstreamReset(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send("n" + strconv.Itoa(c.N()))
		if c.N() == 1 {
			_ = c.Reset()
			return
		}
		holdOpen(c)
	}})
	proxy := proxytest.Start(t, proxytest.Options{ConnectPorts: []int{portOf(t, srv.Addr())}})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.Proxy = always(proxy.URL())
	startClient(t, opts)

	if m := h.nextMessage(t); m.data != "n1" || m.gen != 1 {
		t.Fatalf("message %q of gen %d, want n1 of gen 1", m.data, m.gen)
	}
	if lost := h.nextLost(t); lost.gen != 1 {
		t.Fatalf("lost gen %d, want 1", lost.gen)
	}
	if m := h.nextMessage(t); m.data != "n2" || m.gen != 2 {
		t.Fatalf("message %q of gen %d, want n2 of gen 2", m.data, m.gen)
	}
	requireTunnels(t, proxy, srv.Addr(), 2)

	t.Run("port not allowed", func(t *testing.T) {
		other := newServer(t, upstreamtest.Options{})
		rec := newRecorder()
		opts := testOptions(t, other.URL(), newHandler())
		opts.Proxy = always(proxy.URL())
		opts.Observer = rec
		c := startClient(t, opts)
		first := recv(t, c.First(), "first dial result")
		var pe *proxydial.Error
		if !errors.As(first.Err, &pe) || pe.Status != http.StatusForbidden || first.Permanent {
			t.Fatalf("first dial = %+v, want a transient *proxydial.Error with the proxy's 403", first)
		}
		rec.expect(t, "dialed proxy", "dialed proxy")
	})
}

// TestProxySSE: an http:// event stream is requested from the proxy
// (absolute form), an https:// one through a tunnel; a 407 is the proxy's
// refusal either way, and a stream dropped by the upstream is requested
// again through the proxy.
func TestProxySSE(t *testing.T) {
	sse := newSSEServer(t, ssetest.Options{})
	cert, roots := selfSigned(t)
	front := newTLSFront(t, cert, portAddr(sse.URL()))
	ports := []int{portOf(t, sse.URL()), portOf(t, front.ln.Addr().String())}
	proxy := proxytest.Start(t, proxytest.Options{User: "alice", Password: "s3cret", ConnectPorts: ports})

	for _, tc := range []struct {
		name, url, request string
		tls                *tls.Config
		// refused is the proxy URL of the refusal case and what it reads:
		// to a GET, a 401 can only be read as the upstream's, so the
		// plain-HTTP case sends no credentials, which tinyproxy answers
		// with 407.
		refused *url.URL
		want    string
	}{
		{name: "http", url: sse.URL() + "/feed", request: "GET " + sse.URL() + "/feed ",
			refused: proxy.URLWith("", ""), want: "proxy requires credentials (HTTP 407)"},
		{name: "https", url: "https://" + front.ln.Addr().String() + "/feed", request: "CONNECT " + front.ln.Addr().String() + " ",
			tls:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			refused: proxy.URLWith("alice", "wrong"), want: "proxy rejected credentials (HTTP 401)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Requests, not live streams: the previous case's stream may
			// still be counted live while this one opens.
			before := len(sse.Requests())
			h := newHandler()
			opts := sseOptions(t, tc.url, h)
			opts.TLSConfig = tc.tls
			opts.Proxy = always(proxy.URL())
			c := startClient(t, opts)
			if first := recv(t, c.First(), "first dial result"); first.Err != nil {
				t.Fatalf("first dial: %v", first.Err)
			}
			waitRequests(t, sse, before+1) // recorded as its stream joined
			sse.Publish(ssetest.Event{Data: "one"})
			if m := h.nextMessage(t); !strings.Contains(m.data, `"one"`) {
				t.Fatalf("message %q, want the event", m.data)
			}
			sse.DropAll()
			if lost := h.nextLost(t); lost.gen != 1 {
				t.Fatalf("lost gen %d, want 1", lost.gen)
			}
			h.nextRestore(t) // gen 1
			if r := h.nextRestore(t); r.gen != 2 {
				t.Fatalf("restore of gen %d, want 2", r.gen)
			}
			n := 0
			for _, r := range proxy.Requests() {
				if strings.HasPrefix(r, tc.request) {
					n++
				}
			}
			if n < 2 {
				t.Fatalf("proxy logged %d requests %q..., want 2 (one per stream); its requests: %q", n, tc.request, proxy.Requests())
			}
			c.Close()
		})
		t.Run(tc.name+" refused", func(t *testing.T) {
			rec := newRecorder()
			opts := sseOptions(t, tc.url, newHandler())
			opts.TLSConfig = tc.tls
			opts.Proxy = always(tc.refused)
			opts.Observer = rec
			c := startClient(t, opts)
			first := recv(t, c.First(), "first dial result")
			var pe *proxydial.Error
			if !errors.As(first.Err, &pe) || first.Permanent || !strings.Contains(first.Err.Error(), tc.want) {
				t.Fatalf("first dial = %+v, want the proxy's refusal reading %q", first, tc.want)
			}
			rec.expect(t, "dialed proxy_auth")
		})
	}
}

// portAddr is the host:port of a URL.
func portAddr(raw string) string {
	u, _ := url.Parse(raw)
	return u.Host
}

// TestProxyProbe: the readiness probe dials through the proxy like a
// session, and reports the proxy's refusal.
func TestProxyProbe(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	proxy := proxytest.Start(t, proxytest.Options{User: "alice", Password: "s3cret", ConnectPorts: []int{portOf(t, srv.Addr())}})
	opts := testOptions(t, srv.URL(), newHandler())
	opts.Proxy = always(proxy.URL())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := upstream.Probe(ctx, opts); err != nil {
		t.Fatalf("Probe through the proxy: %v", err)
	}
	requireTunnels(t, proxy, srv.Addr(), 1)
	opts.Proxy = always(proxy.URLWith("alice", "wrong"))
	err := upstream.Probe(ctx, opts)
	var pe *proxydial.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "proxy rejected credentials") {
		t.Fatalf("Probe with wrong proxy credentials = %v, want the proxy's refusal", err)
	}
}

// TestProxyFuncChoice: the ProxyFunc is asked about a ws:// URL as http://
// and a wss:// one as https://, the schemes HTTP_PROXY and HTTPS_PROXY
// serve; a nil answer dials directly.
func TestProxyFuncChoice(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{})
	var asked []string
	opts := testOptions(t, srv.URL(), newHandler())
	opts.Proxy = func(u *url.URL) (*url.URL, error) {
		asked = append(asked, u.Scheme+"://"+u.Host)
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := upstream.Probe(ctx, opts); err != nil {
		t.Fatalf("Probe direct: %v", err)
	}
	if want := []string{"http://" + srv.Addr()}; !slices.Equal(asked, want) {
		t.Errorf("ProxyFunc asked about %q, want %q", asked, want)
	}
}

// TestProxyTunnelDeadline: a proxy that accepts the connection but never
// answers the CONNECT fails the dial within DialTimeout.
func TestProxyTunnelDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	const limit = 300 * time.Millisecond
	opts := testOptions(t, "ws://127.0.0.1:1/", newHandler())
	opts.DialTimeout = limit
	opts.Proxy = always(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	start := time.Now()
	err = upstream.Probe(context.Background(), opts)
	elapsed := time.Since(start)
	var pe *proxydial.Error
	if !errors.As(err, &pe) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Probe = %v, want a *proxydial.Error for the deadline", err)
	}
	if elapsed < limit || elapsed > limit+slack {
		t.Errorf("Probe took %v, want about DialTimeout %v", elapsed, limit)
	}
}

// scriptedProxy answers every connection's first request with answer and
// closes it: the proxies tinyproxy cannot play (a 407 to wrong credentials,
// as squid and most corporate proxies answer).
func scriptedProxy(t *testing.T, answer string) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(waitLimit))
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				_, _ = io.WriteString(c, answer)
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return &url.URL{Scheme: "http", Host: ln.Addr().String(), User: url.UserPassword("alice", "wrong")}
}

// TestProxy407: a 407 to a CONNECT with credentials reads "proxy rejected
// credentials (HTTP 407)" and is labelled proxy_auth.
func TestProxy407(t *testing.T) {
	proxy := scriptedProxy(t, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n")
	rec := newRecorder()
	opts := testOptions(t, "ws://127.0.0.1:1/", newHandler())
	opts.Proxy = always(proxy)
	opts.Observer = rec
	c := startClient(t, opts)
	first := recv(t, c.First(), "first dial result")
	if first.Err == nil || first.Permanent || !strings.HasSuffix(first.Err.Error(), "proxy rejected credentials (HTTP 407)") {
		t.Fatalf("first dial = %+v, want a transient \"proxy rejected credentials (HTTP 407)\"", first)
	}
	rec.expect(t, "dialed proxy_auth")
}
