package proxy_test

import (
	"net/http"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
)

// On a unix socket any Host is accepted (no browser can reach a unix
// socket, so DNS rebinding cannot), while a web page's Origin is still
// refused with 403 before any dial. The same foreign Host on the TCP
// listener is refused.
func TestUnixHostAndOrigin(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: echo})
	m := newCounts()
	e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m }, proxy.ListenerWS, proxy.ListenerUnix)
	path := e.addr[proxy.ListenerUnix]

	for _, host := range []string{"localhost", "evil.example", "tether.sock"} {
		a, ref, err := dialAppVia(t, "unix", path, "ws://"+host+"/", nil)
		if err != nil {
			t.Fatalf("unix app with Host %q refused: %v (status %d, body %q)", host, err, ref.status, ref.body)
		}
		a.sendText(t, "hi "+host)
		expectMsg(t, a, ws.OpText, "hi "+host)
		a.closeNormally(t)
	}

	_, ref, err := dialAppVia(t, "unix", path, "ws://localhost/", http.Header{"Origin": {"http://evil.example"}})
	if err == nil || ref.status != http.StatusForbidden {
		t.Fatalf("unix app with a foreign Origin: %v, status %d; want 403", err, ref.status)
	}
	m.await(t, "rejected "+labels.RejectOrigin, 1)

	_, ref, err = dialAppVia(t, "tcp", e.addr[proxy.ListenerWS], "ws://evil.example/", nil)
	if err == nil || ref.status != http.StatusForbidden {
		t.Fatalf("TCP app with a foreign Host: %v, status %d; want 403", err, ref.status)
	}
	m.await(t, "rejected "+labels.RejectHost, 1)
	if n := up.srv.Handshakes(); n != 3 {
		t.Errorf("upstream saw %d handshakes, want 3: refused handshakes must not dial", n)
	}
}

// With TETHER_FORWARD_PATH the upstream is dialled with the app's path and
// query joined onto its URL, on the ws and the unix listener alike; a path
// that would leave the base is refused with 400 before any dial. Without
// it, every app gets the URL as configured.
func TestForwardPathEndToEnd(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: echo})
	base := up.srv.URL() + "v1?token=t"
	m := newCounts()
	e := newMultiTether(t, base, func(o *proxy.Options) {
		o.Metrics = m
		o.ForwardPath = true
	}, proxy.ListenerWS, proxy.ListenerUnix)

	dialApp(t, e.wsURL()+"prices/./eu/../us%2Fwest?sym=A&sym=B", appOptions{})
	if got := up.nextConn(t).Path(); got != "/v1/prices/us%2Fwest?token=t&sym=A&sym=B" {
		t.Errorf("upstream request target %q for the ws app", got)
	}
	if _, ref, err := dialAppVia(t, "unix", e.addr[proxy.ListenerUnix], "ws://localhost/orders", nil); err != nil {
		t.Fatalf("unix app: %v (status %d)", err, ref.status)
	}
	if got := up.nextConn(t).Path(); got != "/v1/orders?token=t" {
		t.Errorf("upstream request target %q for the unix app", got)
	}

	_, ref, err := tryDialApp(t, e.wsURL()+"..%2Fadmin", appOptions{})
	if err == nil || ref.status != http.StatusBadRequest {
		t.Fatalf("app climbing above the base path: %v, status %d; want 400", err, ref.status)
	}
	m.await(t, "rejected "+labels.RejectPath, 1)
	// A server that strips ";" path parameters reads "..;" as "..".
	_, ref, err = tryDialApp(t, e.wsURL()+"v1/feed/..;/..;/admin", appOptions{})
	if err == nil || ref.status != http.StatusBadRequest {
		t.Fatalf("app climbing with ..; segments: %v, status %d; want 400", err, ref.status)
	}
	m.await(t, "rejected "+labels.RejectPath, 2)
	if n := up.srv.Handshakes(); n != 2 {
		t.Errorf("upstream saw %d handshakes, want 2: a refused path must not dial", n)
	}

	plain := newMultiTether(t, base, nil, proxy.ListenerWS)
	dialApp(t, plain.wsURL()+"ignored?x=1", appOptions{})
	if got := up.nextConn(t).Path(); got != "/v1?token=t" {
		t.Errorf("without TETHER_FORWARD_PATH the upstream saw %q, want the configured /v1?token=t", got)
	}
}
