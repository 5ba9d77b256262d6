package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
)

// rawAnswer is tether's HTTP answer to a hand-written handshake request.
type rawAnswer struct {
	status int
	body   string
}

// rawHandshake sends a WebSocket upgrade request with the given Host and
// extra header lines, and reads tether's answer. It closes the connection
// before returning.
func rawHandshake(t *testing.T, e *tetherEnv, host string, extra ...string) rawAnswer {
	t.Helper()
	nc, err := net.Dial("tcp", e.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	req := "GET / HTTP/1.1\r\nHost: " + host + "\r\n" + strings.Join(extra, "") +
		"Upgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatalf("write handshake: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("read tether's answer: %v", err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ = io.ReadAll(resp.Body)
	}
	return rawAnswer{status: resp.StatusCode, body: string(body)}
}

// addr is the app listener's host:port.
func (e *tetherEnv) addr() string {
	return strings.TrimSuffix(strings.TrimPrefix(e.url, "ws://"), "/")
}

// A web page's handshake carries Origin: unless that origin is listed, tether
// refuses it with 403 and a one-line reason, before the upstream is dialled.
// Native apps send no Origin and are accepted.
func TestOriginCheck(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.AllowedOrigins = []string{"http://localhost:3000", "https://App.Example"}
	})
	host := e.addr()
	refused := []string{
		"http://localhost:3001",        // a page on localhost is foreign until listed
		"http://127.0.0.1:3000",        // the same page under another name is another origin
		"https://evil.example",         // any web page
		"null",                         // a file:// page or a sandboxed frame
		"http://localhost:3000/",       // not an origin at all
		"http://localhost:3000\x00abc", // control characters do not pass either
	}
	for _, origin := range refused {
		a := rawHandshake(t, e, host, "Origin: "+origin+"\r\n")
		if a.status != http.StatusForbidden {
			t.Fatalf("Origin %q: answered %d %q, want 403", origin, a.status, a.body)
		}
		if !strings.Contains(a.body, "TETHER_ALLOWED_ORIGINS") || strings.ContainsAny(a.body, "\r\n") {
			t.Errorf("Origin %q: 403 body %q, want one line naming TETHER_ALLOWED_ORIGINS", origin, a.body)
		}
	}
	m.await(t, "rejected "+labels.RejectOrigin, len(refused))
	if n := up.srv.Handshakes(); n != 0 {
		t.Fatalf("upstream saw %d handshakes, want 0: a refused page must never reach it", n)
	}
	if n := m.get("session started"); n != 0 {
		t.Fatalf("%d sessions admitted for refused handshakes, want 0", n)
	}

	accepted := []string{
		"", // a native app
		"Origin: http://localhost:3000\r\n",
		"Origin: https://app.example:443\r\n", // normalised before comparing
	}
	for i, header := range accepted {
		if a := rawHandshake(t, e, host, header); a.status != http.StatusSwitchingProtocols {
			t.Fatalf("handshake with %q: answered %d %q, want 101", header, a.status, a.body)
		}
		m.await(t, "session ended", i+1)
	}
}

// TETHER_ALLOWED_ORIGINS=* lets any page in; the Host check still applies.
func TestAnyOrigin(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.AllowedOrigins = []string{proxy.AnyOrigin} })
	if a := rawHandshake(t, e, e.addr(), "Origin: https://anything.example\r\n"); a.status != http.StatusSwitchingProtocols {
		t.Fatalf("answered %d %q, want 101", a.status, a.body)
	}
	if a := rawHandshake(t, e, "rebound.example:8080", "Origin: https://anything.example\r\n"); a.status != http.StatusForbidden {
		t.Fatalf("rebound Host: answered %d %q, want 403", a.status, a.body)
	}
}

// A page on a domain whose DNS the attacker re-points at 127.0.0.1 (DNS
// rebinding) arrives with that domain in Host: refused with 403 before the
// upstream is dialled. Loopback names and addresses pass, whatever the port.
func TestHostCheck(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })
	_, port, _ := net.SplitHostPort(e.addr())
	refused := []string{"rebound.example:" + port, "rebound.example", "localhost.rebound.example:" + port, "10.1.2.3:" + port}
	for _, host := range refused {
		a := rawHandshake(t, e, host)
		if a.status != http.StatusForbidden {
			t.Fatalf("Host %q: answered %d %q, want 403", host, a.status, a.body)
		}
		if !strings.Contains(a.body, "DNS rebinding") || strings.ContainsAny(a.body, "\r\n") {
			t.Errorf("Host %q: 403 body %q, want one line naming DNS rebinding", host, a.body)
		}
	}
	m.await(t, "rejected "+labels.RejectHost, len(refused))
	if n := up.srv.Handshakes(); n != 0 {
		t.Fatalf("upstream saw %d handshakes, want 0", n)
	}

	accepted := []string{e.addr(), "localhost:" + port, "127.0.0.1", "LocalHost:1234", "app.localhost:" + port, "[::1]:" + port}
	for i, host := range accepted {
		if a := rawHandshake(t, e, host); a.status != http.StatusSwitchingProtocols {
			t.Fatalf("Host %q: answered %d %q, want 101", host, a.status, a.body)
		}
		m.await(t, "session ended", i+1)
	}
}

// The listen host, when it is a name, is accepted as Host.
func TestHostCheckListenName(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.AllowedHosts = []string{"tether.internal"} })
	if a := rawHandshake(t, e, "Tether.Internal:8080"); a.status != http.StatusSwitchingProtocols {
		t.Fatalf("answered %d %q, want 101", a.status, a.body)
	}
	if a := rawHandshake(t, e, "other.internal:8080"); a.status != http.StatusForbidden {
		t.Fatalf("answered %d %q, want 403", a.status, a.body)
	}
}

// A malformed allowed origin is a configuration error, not a silent refusal
// of every page.
func TestNewRefusesBadAllowedOrigin(t *testing.T) {
	opts := baseOptions(t, "ws://127.0.0.1:1/", newStateRecorder())
	opts.AllowedOrigins = []string{"localhost:3000"}
	if _, err := proxy.New(opts); err == nil {
		t.Fatal("proxy.New accepted an allowed origin without a scheme")
	}
}
