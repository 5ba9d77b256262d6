package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/proxy"
)

// The transport variables reach the proxy (their refusals are tested in
// internal/config).
func TestTransportVariables(t *testing.T) {
	needUnixSockets(t)
	cfg, err := config.Load(configtest.WithURL(map[string]string{
		"TETHER_LISTEN":           "tcp://127.0.0.1:7000,unix:///run/t.sock",
		"TETHER_TCP_BINARY":       "drop",
		"TETHER_TCP_NEWLINE":      "close",
		"TETHER_UNIX_SOCKET_MODE": "0660",
		"TETHER_FORWARD_PATH":     "true",
	}))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if cfg.TCPBinary != proxy.BinaryDrop || cfg.TCPNewline != proxy.NewlineClose || cfg.UnixSocketMode != 0o660 || !cfg.ForwardPath {
		t.Errorf("TCPBinary=%v TCPNewline=%v UnixSocketMode=%v ForwardPath=%v", cfg.TCPBinary, cfg.TCPNewline, cfg.UnixSocketMode, cfg.ForwardPath)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if opts.TCPBinary != proxy.BinaryDrop || opts.TCPNewline != proxy.NewlineClose || !opts.ForwardPath {
		t.Errorf("proxy.Options: TCPBinary=%v TCPNewline=%v ForwardPath=%v", opts.TCPBinary, opts.TCPNewline, opts.ForwardPath)
	}

}

// Settings no listener uses are named for the start-up warning; the
// defaults, and settings some listener uses, are not.
func TestIneffectiveSettings(t *testing.T) {
	needUnixSockets(t)
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{}, nil},
		{map[string]string{"TETHER_TCP_BINARY": "base64", "TETHER_TCP_NEWLINE": "space", "TETHER_UNIX_SOCKET_MODE": "600"}, nil},
		{
			map[string]string{"TETHER_TCP_BINARY": "drop", "TETHER_TCP_NEWLINE": "close", "TETHER_UNIX_SOCKET_MODE": "0660"},
			[]string{"TETHER_TCP_BINARY", "TETHER_TCP_NEWLINE", "TETHER_UNIX_SOCKET_MODE"},
		},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1,unix:///t.sock", "TETHER_TCP_BINARY": "drop", "TETHER_UNIX_SOCKET_MODE": "0660"}, nil},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1", "TETHER_FORWARD_PATH": "true"}, []string{"TETHER_FORWARD_PATH"}},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1,unix:///t.sock", "TETHER_FORWARD_PATH": "true"}, nil},
		{map[string]string{"TETHER_FORWARD_PATH": "true"}, nil},
	}
	for _, tt := range tests {
		cfg, err := config.Load(configtest.WithURL(tt.env))
		if err != nil {
			t.Fatalf("config.Load(%v): %v", tt.env, err)
		}
		if got := ineffectiveSettings(cfg); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%v: ineffectiveSettings = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// An sse:// entry is bound to a listener that carries its path, which is
// what the proxy serves; the other kinds get plain listeners.
func TestBindSSECarriesPath(t *testing.T) {
	var l config.ListenList
	if err := l.UnmarshalText([]byte("sse://127.0.0.1:0/events,127.0.0.1:0,sse://127.0.0.1:0")); err != nil {
		t.Fatal(err)
	}
	lns, err := openListeners(l, config.DefaultSocketMode, zap.NewNop())
	if err != nil {
		t.Fatalf("openListeners: %v", err)
	}
	defer closeListeners(lns)
	for i, want := range []string{"/events", "", "/"} {
		sl, ok := lns[i].ln.(*proxy.SSEListener)
		switch {
		case want == "" && ok:
			t.Errorf("entry %d (%s) bound as an sse listener", i+1, lns[i].spec)
		case want != "" && (!ok || sl.Path != want):
			t.Errorf("entry %d (%s) bound as %T, want an *proxy.SSEListener with path %q", i+1, lns[i].spec, lns[i].ln, want)
		}
	}
}

// An sse:// entry end to end: tether announces it, an EventSource request
// at its path gets the upstream's messages as events, the session is
// counted under listener="sse", and the drain ends the stream with a
// tether-close event.
func TestSSEListenerEndToEnd(t *testing.T) {
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL": up.URL(),
		"TETHER_LISTEN":       "sse://127.0.0.1:0/events",
	})
	listening := r.logs.FilterMessage("listening").All()
	if len(listening) != 1 || listening[0].ContextMap()["kind"] != "sse" || listening[0].ContextMap()["entry"] != "sse://127.0.0.1:0/events" {
		t.Fatalf("listening log entries %v, want one for the sse entry", listening)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(r.appURL, "ws://"), "/")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/events")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answered %d %q, want an event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := sse.NewReader(resp.Body, sse.Options{})
	next := func() sse.Item {
		t.Helper()
		item, err := rd.Next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		return item
	}
	if item := next(); item.Kind != sse.KindID || !strings.HasSuffix(item.LastEventID, "-0") {
		t.Fatalf("stream starts with %+v, want the session's id block", item)
	}
	if item := next(); item.Kind != sse.KindEvent || item.Event.Data != `{"t":"welcome"}` || !strings.HasSuffix(item.Event.ID, "-1") {
		t.Fatalf("got %+v, want the upstream's welcome as event 1", item)
	}
	awaitMetric(t, r.adminURL, "tether_sessions", map[string]string{"listener": "sse"}, 1)
	if _, err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if item := next(); item.Kind != sse.KindEvent || item.Event.Type != "tether-close" || !strings.Contains(item.Event.Data, `"code":1001`) {
		t.Fatalf("got %+v after the drain began, want tether-close 1001", item)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after tether-close: %v, want the end of the stream", err)
	}
}
