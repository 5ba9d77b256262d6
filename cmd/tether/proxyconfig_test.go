package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/proxytest"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// TestSidecarThroughProxy: tether, configured as a user configures it,
// reaches a loopback upstream through a real proxy with credentials, and
// logs which proxy it uses without the password.
func TestSidecarThroughProxy(t *testing.T) {
	srv := newTestUpstream(t, upstreamtest.Options{}) // echo
	_, port, _ := net.SplitHostPort(srv.Addr())
	n, _ := strconv.Atoi(port)
	proxy := proxytest.Start(t, proxytest.Options{User: "alice", Password: "s3cret", ConnectPorts: []int{n}})

	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":   srv.URL(),
		"TETHER_UPSTREAM_PROXY": proxy.URL().String(),
		"HTTPS_PROXY":           "http://127.0.0.1:1", // overridden
	})
	app := dialTestApp(t, r.appURL)
	app.send(t, "via the proxy")
	app.expect(t, "via the proxy")
	started := r.logs.FilterMessage("tether started").All()
	if len(started) != 1 {
		t.Fatalf("%d \"tether started\" lines, want 1", len(started))
	}
	want := "http://alice:REDACTED@" + proxy.Addr() + " (TETHER_UPSTREAM_PROXY)"
	if got := started[0].ContextMap()["upstream_proxy"]; got != want {
		t.Errorf("upstream_proxy logged as %q, want %q", got, want)
	}
	for _, e := range r.logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "s3cret") {
				t.Errorf("log %q field %s holds the proxy password", e.Message, k)
			}
		}
	}
	found := false
	for _, req := range proxy.Requests() {
		found = found || strings.HasPrefix(req, "CONNECT "+srv.Addr()+" ")
	}
	if !found {
		t.Errorf("the proxy tunnelled nothing to %s; its requests: %q", srv.Addr(), proxy.Requests())
	}
}
