package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// scriptedUpstream greets every connection with a welcome (the confirmation
// pattern), then obeys the app: "reset" resets TCP, "restart" closes with
// 1012, anything else is echoed.
func scriptedUpstream(t *testing.T) *upstreamtest.Server {
	return newTestUpstream(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send(`{"t":"welcome"}`)
		for {
			_, data, err := c.Read(c.Context())
			if err != nil {
				return
			}
			switch string(data) {
			case "reset":
				_ = c.Reset()
				return
			case "restart":
				_ = c.CloseWith(1012, "restarting")
				return
			}
			if c.Send(string(data)) != nil {
				return
			}
		}
	}})
}

// TestMetricsAfterResetAndRestart scrapes the real admin server while the
// upstream resets a connection and then restarts (1012): each loss is counted
// with its reason and code, each reconnect lands in the loss → confirmed
// histogram (the 1012 one after at least TETHER_RESTART_FLOOR), dials and
// messages are counted, and the sessions gauge follows the app.
func TestMetricsAfterResetAndRestart(t *testing.T) {
	const restartFloor = 100 * time.Millisecond
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":    up.URL(),
		"TETHER_CONFIRM_MATCH":   `{"t":"welcome"}`,
		"TETHER_RESTART_FLOOR":   restartFloor.String(),
		"TETHER_TRY_AGAIN_FLOOR": "100ms",
	})
	welcome := `{"t":"welcome"}`
	wsSessions := map[string]string{"listener": "ws"}
	dialsOK := map[string]string{"result": "ok"}
	reset := map[string]string{"reason": "reset", "code": "none"}
	restart := map[string]string{"reason": "close", "code": "1012"}

	before := scrape(t, r.adminURL)
	for _, kind := range []string{"ws", "unix", "tcp", "sse"} {
		if s, ok := sample(before, "tether_sessions", map[string]string{"listener": kind}); !ok || s.GetGauge().GetValue() != 0 {
			t.Errorf("tether_sessions{listener=%q} does not exist at 0 before any app", kind)
		}
	}
	if _, ok := sample(before, "tether_upstream_disconnects_total", reset); !ok {
		t.Error("tether_upstream_disconnects_total{reason=\"reset\"} does not exist at zero before the first reset")
	}
	app := dialTestApp(t, r.appURL)
	app.expect(t, welcome)
	awaitMetric(t, r.adminURL, "tether_sessions", wsSessions, 1)
	awaitMetric(t, r.adminURL, "tether_upstream_dials_total", dialsOK, 1)

	app.send(t, "reset")
	app.expect(t, welcome) // from the second connection
	m := awaitMetric(t, r.adminURL, "tether_reconnect_seconds", nil, 1)
	for name, labels := range map[string]map[string]string{
		"tether_upstream_disconnects_total": reset,
		"tether_upstream_dials_total":       dialsOK,
	} {
		want := map[string]float64{"tether_upstream_disconnects_total": 1, "tether_upstream_dials_total": 2}[name]
		if got := value(m, name, labels); got != want {
			t.Errorf("after a reset, %s%v = %v, want %v", name, labels, got, want)
		}
	}

	app.send(t, "restart")
	app.expect(t, welcome) // from the third connection
	m = awaitMetric(t, r.adminURL, "tether_reconnect_seconds", nil, 2)
	if got := value(m, "tether_upstream_disconnects_total", restart); got != 1 {
		t.Errorf("after a 1012, disconnects{reason=close,code=1012} = %v, want 1", got)
	}
	if got := value(m, "tether_upstream_dials_total", dialsOK); got != 3 {
		t.Errorf("after a 1012, dials{result=ok} = %v, want 3", got)
	}
	h, _ := sample(m, "tether_reconnect_seconds", nil)
	if sum := h.GetHistogram().GetSampleSum(); sum < restartFloor.Seconds() {
		t.Errorf("tether_reconnect_seconds_sum = %vs after a 1012, want ≥ the restart floor %v", sum, restartFloor)
	}

	awaitMetric(t, r.adminURL, "tether_messages_total", map[string]string{"direction": "app_to_upstream", "listener": "ws"}, 2)
	awaitMetric(t, r.adminURL, "tether_messages_total", map[string]string{"direction": "upstream_to_app", "listener": "ws"}, 3)
	app.close(t)
	app.expectClose(t, 1000)
	awaitMetric(t, r.adminURL, "tether_sessions", wsSessions, 0)
}

// TestMetricsOutageAndRejections: while every upstream handshake answers 503,
// app messages show in the outbox gauge and dials are counted as http_5xx; an
// app over TETHER_MAX_SESSIONS is counted as a rejection; when the app leaves
// the gauges return to 0.
func TestMetricsOutageAndRejections(t *testing.T) {
	up := newTestUpstream(t, upstreamtest.Options{Handshake: func(upstreamtest.Handshake) (int, http.Header) {
		return http.StatusServiceUnavailable, nil
	}})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":        up.URL(),
		"TETHER_MAX_SESSIONS":        "1",
		"TETHER_BACKOFF_BASE":        "50ms",
		"TETHER_BACKOFF_CAP":         "50ms",
		"TETHER_ACCEPT_WAIT":         "2s",
		"TETHER_MAX_ATTEMPTS":        "0",
		"TETHER_OUTBOX_MAX_MESSAGES": "10",
	})
	app := dialTestApp(t, r.appURL)
	for _, m := range []string{"a", "b", "c"} {
		app.send(t, m)
	}
	awaitMetric(t, r.adminURL, "tether_outbox_messages", nil, 3)
	awaitMetric(t, r.adminURL, "tether_messages_total", map[string]string{"direction": "app_to_upstream", "listener": "ws"}, 3)
	m := scrape(t, r.adminURL)
	if v := value(m, "tether_upstream_dials_total", map[string]string{"result": "http_5xx"}); v < 1 {
		t.Errorf("dials{result=http_5xx} = %v during a 503 outage, want ≥ 1", v)
	}
	if v := value(m, "tether_upstream_dials_total", map[string]string{"result": "ok"}); v != 0 {
		t.Errorf("dials{result=ok} = %v during a 503 outage, want 0", v)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var status int
	d := ws.Dialer{OnStatusError: func(code int, _ []byte, _ io.Reader) { status = code }}
	if conn, _, _, err := d.Dial(ctx, r.appURL); err == nil {
		_ = conn.Close()
		t.Fatal("second app admitted over TETHER_MAX_SESSIONS=1")
	}
	if status != http.StatusServiceUnavailable {
		t.Errorf("second app refused with HTTP %d, want 503", status)
	}
	awaitMetric(t, r.adminURL, "tether_app_handshake_rejections_total", map[string]string{"reason": "max_sessions"}, 1)

	app.close(t)
	app.expectClose(t, 1000)
	awaitMetric(t, r.adminURL, "tether_sessions", map[string]string{"listener": "ws"}, 0)
	awaitMetric(t, r.adminURL, "tether_outbox_messages", nil, 0)
}

// TestMetricsExposition: every metric of docs/design.md "Operations" and of the
// README is served, build info carries the version, the Go and process
// collectors are there, and no tether_* series has a label outside the
// documented, bounded set (no session id, no URL).
func TestMetricsExposition(t *testing.T) {
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": up.URL()})
	m := scrape(t, r.adminURL)
	for _, name := range []string{
		"tether_sessions", "tether_upstream_dials_total", "tether_upstream_disconnects_total",
		"tether_reconnect_seconds", "tether_messages_total", "tether_duplicates_dropped_total",
		"tether_gaps_total", "tether_replayed_messages_total", "tether_outbox_messages",
		"tether_outbox_dropped_total", "tether_recoveries_total", "tether_app_handshake_rejections_total",
		"tether_held_bytes", "tether_sse_resumes_total", "tether_draining", "tether_build_info", "tether_app_dropped_total", "go_goroutines",
		"go_gc_heap_live_bytes",
	} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := value(m, "tether_build_info", map[string]string{"version": version}); v != 1 {
		t.Errorf("tether_build_info{version=%q} = %v, want 1", version, v)
	}
	allowed := map[string]bool{"result": true, "reason": true, "code": true, "direction": true,
		"outcome": true, "method": true, "version": true, "listener": true}
	for name, f := range m {
		if !strings.HasPrefix(name, "tether_") {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if !allowed[lp.GetName()] {
					t.Errorf("%s has label %q, outside the documented set", name, lp.GetName())
				}
			}
		}
	}
}

// The label values the proxy emits are the ones internal/metrics documents
// and pre-creates.
func TestProxyLabelsMatchMetrics(t *testing.T) {
	if string(proxy.ListenerWS) != labels.ListenerWS || string(proxy.ListenerUnix) != labels.ListenerUnix ||
		string(proxy.ListenerTCP) != labels.ListenerTCP || string(proxy.ListenerSSE) != labels.ListenerSSE {
		t.Error("proxy and internal/metrics disagree on listener kinds")
	}
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": up.URL()})
	m := scrape(t, r.adminURL)
	for _, reason := range []string{labels.RejectMaxSessions, labels.RejectDraining, labels.RejectUpstreamPermanent,
		labels.RejectBadRequest, labels.RejectTimeout, labels.RejectAborted,
		labels.RejectOrigin, labels.RejectHost, labels.RejectHeadersTooLarge, labels.RejectPath} {
		if _, ok := sample(m, "tether_app_handshake_rejections_total", map[string]string{"reason": reason}); !ok {
			t.Errorf("rejection reason %q is not pre-created by internal/metrics", reason)
		}
	}
	for _, reason := range []string{labels.DropTooLarge, labels.DropInvalidUTF8, labels.DropUnterminated,
		labels.DropBinary, labels.DropNewline, labels.DropReadOnly, labels.DropUnframed, labels.DropEnded, labels.DropUnsent} {
		if _, ok := sample(m, "tether_app_dropped_total", map[string]string{"reason": reason}); !ok {
			t.Errorf("drop reason %q is not pre-created by internal/metrics", reason)
		}
	}
	for _, kind := range []proxy.ListenerKind{proxy.ListenerWS, proxy.ListenerUnix, proxy.ListenerTCP, proxy.ListenerSSE} {
		for _, dir := range []string{labels.DirectionAppToUpstream, labels.DirectionUpstreamToApp} {
			if _, ok := sample(m, "tether_messages_total", map[string]string{"direction": dir, "listener": string(kind)}); !ok {
				t.Errorf("tether_messages_total{direction=%q,listener=%q} is not pre-created", dir, kind)
			}
		}
	}
}
