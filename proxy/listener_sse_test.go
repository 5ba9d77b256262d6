package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// An EventSource gets a text/event-stream at once (the first block sets
// its last event id to the new session's position 0, so even a reconnect
// before the first event names the session), then one event per upstream
// message: text as data, split into data lines at line breaks and read
// back whole, binary as base64; each with the id <token>-<n>, n rising
// from 1. The stream is not cached by the way, and it is counted.
func TestSSEStream(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })
	es := newEventSource(t, e.url, nil)
	es.connect(t)
	if h := es.conn.resp.Header; h.Get("Cache-Control") != "no-cache" || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("stream headers %v: want Cache-Control no-cache and no CORS header without Origin", h)
	}
	first := es.nextItem(t)
	if first.Kind != sse.KindID {
		t.Fatalf("stream starts with %v, want an id-only block", first.Kind)
	}
	token, n := splitID(t, first.LastEventID)
	if n != 0 {
		t.Fatalf("first id %q, want <token>-0", first.LastEventID)
	}
	c := up.nextConn(t)
	sendOrFail(t, c.Send("hello"))
	sendOrFail(t, c.Send("{\"a\":1,\r\n\"b\":2}"))
	sendOrFail(t, c.SendBinary(binaryPayload))
	sendOrFail(t, c.Send(""))
	for i, want := range []string{"hello", "{\"a\":1,\n\"b\":2}", base64.StdEncoding.EncodeToString(binaryPayload), ""} {
		ev := es.next(t)
		if ev.Type != sse.DefaultType || ev.Data != want || ev.ID != token+"-"+strconv.Itoa(i+1) {
			t.Fatalf("event %d = %q %q id %q, want message %q id %s-%d", i+1, ev.Type, ev.Data, ev.ID, want, token, i+1)
		}
	}
	es.expectOpen(t)
	m.await(t, "session started sse", 1)
	m.await(t, "message upstream_to_app sse", 4)
}

// The upstream fails in every way while an EventSource reads a steady
// numbered stream: the EventSource never sees its stream end (an
// EventSource fires "error" then), makes one request only, and reads every
// event once, in order, with ids rising by one: the upstream's losses are
// tether's business.
func TestSSEAcrossUpstreamFaults(t *testing.T) {
	feed := newHistFeed(t, time.Millisecond)
	e := newSSETether(t, feed.srv.URL(), histRules(t))
	es := openEventSource(t, e.url)
	var v histView
	v.take(t, es)
	v.until(t, es, v.last+20)
	faults := []struct {
		name  string
		apply func(c *upstreamtest.Conn)
	}{
		{"reset", func(c *upstreamtest.Conn) { _ = c.Reset() }},
		{"half-open", func(c *upstreamtest.Conn) { c.IgnorePings(true); c.Stall() }},
		{"restart 1012", func(c *upstreamtest.Conn) { _ = c.CloseWith(1012, "service restart") }},
	}
	for _, f := range append(faults, faults...) {
		c := feed.takeNewest(t)
		f.apply(c)
		after := <-feed.resumes
		head := int64(feed.head())
		v.until(t, es, head+20)
		if after == 0 {
			t.Fatalf("%s: the new connection resumed after 0", f.name)
		}
		_ = c.Close() // the stalled one: tether has left it
	}
	es.expectOpen(t)
	if es.requests != 1 {
		t.Errorf("the EventSource made %d requests, want 1", es.requests)
	}
}

// The app's own connection drops (a sleeping laptop, a proxy restart) and
// its EventSource reconnects with the last id it got: the session was
// waiting, with its upstream connection, and the app reads every event
// after that id, then the live ones: none lost, none twice, and no new
// upstream connection.
func TestSSEAppReconnectResumes(t *testing.T) {
	feed := newHistFeed(t, time.Millisecond)
	m := newCounts()
	e := newSSETether(t, feed.srv.URL(), func(o *proxy.Options) {
		histRules(t)(o)
		o.Metrics = m
	})
	es := openEventSource(t, e.url)
	var v histView
	v.until(t, es, 1)
	v.until(t, es, v.last+30)
	for range 5 {
		es.drop()
		// Events keep coming while the app is away.
		target := feed.head() + 50
		eventually(t, "50 more events published", func() bool { return feed.head() >= target })
		es.connect(t)
		v.until(t, es, int64(target)+20)
	}
	es.expectOpen(t)
	if n := feed.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1: a reconnecting app resumes its session", n)
	}
	if n := m.get("session started sse"); n != 1 {
		t.Errorf("%d sessions started, want 1", n)
	}
}

// An app that stays away longer than the linger time finds its session
// gone: the session closed its upstream with 1000 and ended, and the app's
// reconnection gets a new session whose stream starts with a tether-gap
// event (reason session_gone) carrying the new session's position 0, then
// the new session's events. The app knows it missed something.
func TestSSELingerExpires(t *testing.T) {
	const linger = 200 * time.Millisecond
	probe := startLatenessProbe(t)
	up := newUpstream(t, upstreamConfig{})
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.SSELinger = linger })
	es := openEventSource(t, e.url)
	c := up.nextConn(t)
	sendOrFail(t, c.Send("one"))
	ev := es.next(t)
	oldToken, _ := splitID(t, ev.ID)

	left := time.Now()
	es.drop()
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	withinLate(t, probe, "session end after the app left", time.Since(left), linger, linger+slack)
	e.expectSessions(t, 0)

	es.connect(t)
	_, id := es.expectGap(t, "session_gone")
	token, n := splitID(t, id)
	if token == oldToken || n != 0 {
		t.Fatalf("gap notice id %q, want a new session's <token>-0", id)
	}
	c2 := up.nextConn(t)
	sendOrFail(t, c2.Send("two"))
	if ev := es.next(t); ev.Data != "two" || ev.ID != token+"-1" {
		t.Fatalf("got %q id %q, want two id %s-1", ev.Data, ev.ID, token)
	}
}

// A Last-Event-ID that names no session here, a well-formed one (forged,
// or from before a restart) or not a tether id at all, starts a new
// session announced by a tether-gap event; it attaches to nothing.
func TestSSEUnknownLastEventID(t *testing.T) {
	tests := []struct {
		name, id, reason string
	}{
		{"forged token", rand.Text() + "-7", "session_gone"},
		{"foreign id", "1234", "foreign_id"},
		{"malformed", "ABC-x", "foreign_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{})
			e := newSSETether(t, up.srv.URL(), nil)
			owner := openEventSource(t, e.url)
			owner.nextItem(t)
			es := newEventSource(t, e.url, nil)
			es.lastID = tc.id
			es.connect(t)
			_, id := es.expectGap(t, tc.reason)
			if strings.HasPrefix(id, strings.SplitN(owner.lastID, "-", 2)[0]) {
				t.Fatalf("a new app got the other app's session %q", id)
			}
			e.expectSessions(t, 2)
		})
	}
}

// Two requests for one session (the app's old connection is half-open and
// its EventSource reconnected): the newer one takes the stream over from
// the app's last id, and the older one's response ends.
func TestSSENewerRequestTakesOver(t *testing.T) {
	feed := newHistFeed(t, time.Millisecond)
	e := newSSETether(t, feed.srv.URL(), histRules(t))
	old := openEventSource(t, e.url)
	var v histView
	v.until(t, old, 1)
	v.until(t, old, v.last+20)

	es := newEventSource(t, e.url, nil)
	es.lastID = old.lastID
	es.connect(t)
	old.expectEndOrCut(t)
	v.until(t, es, v.last+50)
	es.expectOpen(t)
	e.expectSessions(t, 1)
}

// expectEndOrCut waits for the stream to end, cleanly or not.
func (es *eventSource) expectEndOrCut(t *testing.T) {
	t.Helper()
	select {
	case err := <-es.conn.ended:
		es.conn.ended <- err
	case <-time.After(testTimeout):
		t.Fatalf("the replaced stream did not end within %v", testTimeout)
	}
}

// While the upstream is down, an idle stream carries keep-alive comments
// every ping interval, so no proxy between the app and tether closes it.
func TestSSEKeepAlive(t *testing.T) {
	up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n > 1 {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}})
	e := newSSETether(t, up.srv.URL(), nil)
	es := openEventSource(t, e.url)
	es.nextItem(t) // the id block
	_ = up.nextConn(t).Reset()
	var first time.Time
	for i := 0; i < 3; i++ {
		if item := es.nextItem(t); item.Kind != sse.KindComment || item.Comment != "keep-alive" {
			t.Fatalf("got %v %+v while the upstream is down, want a keep-alive comment", item.Kind, item)
		}
		if i == 0 {
			first = time.Now()
		}
	}
	// Each comment comes a ping interval after the previous write; the
	// lower bound leaves room for the first one reaching the test late.
	within(t, "two keep-alive intervals", time.Since(first), 3*pingInterval/2, 2*pingInterval+slack)
	es.expectOpen(t)
}

// Requests tether turns away never reach the upstream: a foreign Origin or
// Host (403, as on a WebSocket listener), another path (404), another
// method (405), each with a one-line reason. An allowed Origin is echoed
// for CORS.
func TestSSERefusals(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		status int
		reason string
	}{
		{"foreign origin", http.MethodGet, ssePath, http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden, "origin"},
		{"page on localhost", http.MethodGet, ssePath, http.Header{"Origin": {"http://localhost:3000"}}, http.StatusForbidden, "origin"},
		{"rebinding host", http.MethodGet, ssePath, http.Header{"Host": {"evil.example:8080"}}, http.StatusForbidden, "host"},
		{"other path", http.MethodGet, "/other", nil, http.StatusNotFound, "path"},
		{"trailing slash", http.MethodGet, ssePath + "/", nil, http.StatusNotFound, "path"},
		{"post", http.MethodPost, ssePath, nil, http.StatusMethodNotAllowed, "bad_request"},
		{"head", http.MethodHead, ssePath, nil, http.StatusMethodNotAllowed, "bad_request"},
		{"body", http.MethodGet, ssePath, http.Header{"Body": {"x"}}, http.StatusBadRequest, "bad_request"},
	}
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.AllowedOrigins = []string{"http://localhost:5173"}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := m.get("rejected " + tc.reason)
			status, header, body := rawSSE(t, e, tc.method, tc.path, tc.header)
			if status != tc.status {
				t.Fatalf("answered %d %q, want %d", status, body, tc.status)
			}
			if tc.method != http.MethodHead && (body == "" || strings.Count(body, "\n") != 1) {
				t.Errorf("body %q, want one line", body)
			}
			if tc.status == http.StatusMethodNotAllowed && header.Get("Allow") != http.MethodGet {
				t.Errorf("405 without Allow: GET (%v)", header)
			}
			m.await(t, "rejected "+tc.reason, before+1)
		})
	}
	if n := up.srv.Handshakes(); n != 0 {
		t.Fatalf("upstream saw %d handshakes for refused requests, want 0", n)
	}
	e.expectSessions(t, 0)

	es := newEventSource(t, e.url, http.Header{"Origin": {"http://localhost:5173"}})
	es.connect(t)
	if got := es.conn.resp.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:5173" {
		t.Errorf("Access-Control-Allow-Origin %q, want the allowed origin", got)
	}
}

// A CORS preflight from an allowed origin (a fetch-based EventSource
// polyfill sending Last-Event-ID, or Chrome's Private Network Access check
// before a public site reads a loopback address) is answered with the
// permissions asked for; from another origin it is refused like the GET.
func TestSSEPreflight(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.AllowedOrigins = []string{"https://app.example.com"} })
	ask := http.Header{
		"Access-Control-Request-Method":          {"GET"},
		"Access-Control-Request-Headers":         {"last-event-id"},
		"Access-Control-Request-Private-Network": {"true"},
	}
	with := func(origin string) http.Header {
		h := ask.Clone()
		h.Set("Origin", origin)
		return h
	}
	status, h, _ := rawSSE(t, e, http.MethodOptions, ssePath, with("https://app.example.com"))
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		h.Get("Access-Control-Allow-Methods") != "GET" || h.Get("Access-Control-Allow-Headers") != "last-event-id" ||
		h.Get("Access-Control-Allow-Private-Network") != "true" {
		t.Errorf("preflight answered %d %v, want 204 allowing the origin, GET, Last-Event-ID and the private network", status, h)
	}
	if status, _, _ := rawSSE(t, e, http.MethodOptions, ssePath, with("https://evil.example")); status != http.StatusForbidden {
		t.Errorf("preflight from a foreign origin answered %d, want 403", status)
	}
	if status, _, _ := rawSSE(t, e, http.MethodOptions, ssePath, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("OPTIONS that is no preflight answered %d, want 405", status)
	}
	if n := up.srv.Handshakes(); n != 0 {
		t.Errorf("upstream saw %d handshakes for preflights, want 0", n)
	}
	e.expectSessions(t, 0)
}

// rawSSE sends one request, with header values as given (Host included;
// "Body" is sent as the request body), and returns the answer.
func rawSSE(t *testing.T, e *sseEnv, method, path string, header http.Header) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if b := header.Get("Body"); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+e.addr+path, body)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	for k, v := range header {
		switch k {
		case "Host":
			req.Host = v[0]
		case "Body":
		default:
			req.Header[k] = v
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(answer)
}

// TETHER_MAX_SESSIONS counts sse:// sessions, lingering ones included (they
// hold an upstream connection): a request beyond it gets 503; once a
// session ends, a request gets a stream again.
func TestSSEMaxSessions(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) {
		o.MaxSessions = 1
		o.Metrics = m
		o.SSELinger = 300 * time.Millisecond
	})
	first := openEventSource(t, e.url)
	second := newEventSource(t, e.url, nil)
	if a := second.try(t); a == nil || a.status != http.StatusServiceUnavailable {
		t.Fatalf("second app answered %+v, want 503", a)
	}
	first.drop()
	if a := second.try(t); a == nil || a.status != http.StatusServiceUnavailable {
		t.Fatalf("while the first session lingers, answered %+v, want 503", a)
	}
	e.expectSessions(t, 0)
	second.connect(t)
	m.await(t, "rejected max_sessions", 2)
}

// A permanent answer to the first dial refuses the request with 502 and
// says why in one line; nothing is left behind.
func TestSSEPermanentFirstDial(t *testing.T) {
	up := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) { return http.StatusNotFound, nil }})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })
	a := newEventSource(t, e.url, nil).try(t)
	if a == nil || a.status != http.StatusBadGateway {
		t.Fatalf("answered %+v, want 502", a)
	}
	if body := strings.TrimSuffix(a.body, "\n"); !strings.Contains(body, "404") || strings.Contains(body, "\n") {
		t.Errorf("502 body %q, want one line naming the upstream's 404", a.body)
	}
	m.await(t, "rejected upstream_permanent", 1)
	e.expectSessions(t, 0)
}

// Shutdown ends each stream cleanly: the events queued, then a
// tether-close event with 1001 and the reason, then the end of the
// response; the session closes its upstream with 1000.
func TestSSEDrain(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newSSETether(t, up.srv.URL(), nil)
	es := openEventSource(t, e.url)
	c := up.nextConn(t)
	sendOrFail(t, c.Send("one"))
	if ev := es.next(t); ev.Data != "one" {
		t.Fatalf("got %q, want one", ev.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx, 0); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	events := es.expectEnd(t)
	if len(events) != 1 || events[0].Type != "tether-close" {
		t.Fatalf("stream ended with %+v, want one tether-close event", events)
	}
	var note struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(events[0].Data), &note); err != nil || note.Code != 1001 || note.Reason != "tether shutting down" {
		t.Fatalf("tether-close data %q, want code 1001 and the reason", events[0].Data)
	}
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	if _, err := net.Dial("tcp", e.addr); err == nil {
		t.Error("the sse:// listener still accepts after Shutdown")
	}
}

// A fleet of EventSource apps whose upstream restarts: none of them sees
// its stream end or reconnects (a bare EventSource would, every few
// seconds, all at once), and their sessions come back to the upstream one
// connection each, spread by the backoff jitter, not in a burst.
func TestSSEFleetDoesNotStampede(t *testing.T) {
	const (
		apps  = 20
		floor = 100 * time.Millisecond
		base  = 500 * time.Millisecond
	)
	trigger := make(chan struct{})
	up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if c.N() > apps {
			_ = c.Send("back")
			<-c.Done()
			return
		}
		select {
		case <-trigger:
			_ = c.CloseWith(1012, "restarting")
		case <-c.Done():
		}
	}})
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) {
		o.MaxSessions = apps
		o.Logger = quietLogger(t)
		o.Upstream.Backoff.Base, o.Upstream.Backoff.Cap = base, 4*base
		o.Upstream.Close.RestartFloor = floor
		noHeartbeat(o)
	})
	fleet := make([]*eventSource, apps)
	for i := range fleet {
		fleet[i] = openEventSource(t, e.url)
	}
	nextHandshakes(t, up, apps)
	restart := time.Now()
	close(trigger)
	hs := nextHandshakes(t, up, apps)
	first, last := hs[0].at, hs[0].at
	for _, h := range hs {
		if h.at.Before(restart.Add(floor)) {
			t.Errorf("a session reconnected %v after the restart, before the floor %v", h.at.Sub(restart), floor)
		}
		first, last = minTime(first, h.at), maxTime(last, h.at)
	}
	if spread := last.Sub(first); spread < base/5 {
		t.Errorf("%d reconnections within %v: a burst, want them spread over the jitter (%v)", apps, spread, base)
	}
	for i, es := range fleet {
		if ev := es.next(t); ev.Data != "back" {
			t.Fatalf("app %d got %q, want the new connection's first message", i, ev.Data)
		}
		es.expectOpen(t)
		if es.requests != 1 {
			t.Errorf("app %d made %d requests, want 1", i, es.requests)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The session keeps the events it wrote only while they leave room in
// TETHER_DOWNSTREAM_BUFFER_BYTES: an app that comes back asking for events
// the buffer no longer holds gets a tether-gap event (reason evicted)
// counting exactly the events it lost, then every event from the oldest
// kept on, in order.
func TestSSEResumeAfterEviction(t *testing.T) {
	const (
		events = 20
		size   = 200 // bytes of data per event
		entry  = 242 // encoded, with a two-digit id; one-digit ids are a byte shorter
	)
	msg := func(i int) string { return fmt.Sprintf("m%03d%s", i, strings.Repeat(".", size-4)) }
	up := newUpstream(t, upstreamConfig{})
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) {
		o.DownstreamBufferBytes = 8*entry + entry/2
	})
	es := openEventSource(t, e.url)
	c := up.nextConn(t)
	var resumeID string
	for i := 1; i <= 5; i++ {
		sendOrFail(t, c.Send(msg(i)))
		if ev := es.next(t); ev.Data != msg(i) {
			t.Fatalf("got %.4q, want m%03d", ev.Data, i)
		}
		if i == 2 {
			resumeID = es.lastID
		}
	}
	es.drop()
	for i := 6; i <= events; i++ {
		sendOrFail(t, c.Send(msg(i)))
	}
	// Seven pending events leave room for at most one written one: the
	// events after m2 cannot all be kept any more.
	eventually(t, "seven events pending", func() bool {
		q := e.srv.AppQueuedBytes()
		return len(q) == 1 && q[0] >= 7*entry
	})
	es.lastID = resumeID
	es.connect(t)
	g, _ := es.expectGap(t, "evicted")
	if g.Lost < 2 {
		t.Fatalf("gap notice counts %d lost events, want at least m3 and m4", g.Lost)
	}
	token, _ := splitID(t, resumeID)
	for i := 3 + int(g.Lost); i <= events; i++ {
		ev := es.next(t)
		if ev.Data != msg(i) || ev.ID != token+"-"+strconv.Itoa(i) {
			t.Fatalf("got %.4q id %q, want m%03d id %s-%d", ev.Data, ev.ID, i, token, i)
		}
	}
	es.expectOpen(t)
}

// An EventSource that stops reading fills the session's buffer; tether then
// stops reading the upstream instead of buffering more, without taking
// that silence for a dead upstream. What is queued stays within
// TETHER_DOWNSTREAM_BUFFER_BYTES and one event; when the app reads again,
// everything arrives, once and in order.
func TestSSESlowAppBackPressure(t *testing.T) {
	const (
		count  = 1000
		size   = 32 << 10 // 32 MiB in all: beyond the 1 MiB buffer and the kernel's socket buffers (awaitAppQueued)
		buffer = 1 << 20  // baseOptions' DownstreamBufferBytes
		// sendBuffer fixes tether's send buffer towards the app: once the
		// queue holds buffer/2 more than the kernel could still take of it
		// (2*sendBuffer), it holds at least buffer/2 until the app reads,
		// whichever of tether's goroutines runs when. With the buffer the
		// kernel grows by itself (4 MiB here) the queue could fill while
		// tether's writer was merely starved, with megabytes of room left
		// in the socket: the writer then emptied it there, and the final
		// check found 0 bytes queued (3 of 88 runs at load 10-15).
		sendBuffer = 64 << 10
	)
	up := newUpstream(t, upstreamConfig{})
	e := newSSETetherOn(t, up.srv.URL(), nil, func(ln net.Listener) net.Listener {
		return sendBufferListener{Listener: ln, bytes: sendBuffer}
	})
	es := newEventSource(t, e.url, nil)
	es.paused = make(chan struct{})
	es.connect(t)
	c := up.nextConn(t)

	padding := strings.Repeat("x", size)
	sent := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range count {
			if err := c.Send(fmt.Sprintf("%d|%s", i, padding)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })

	// Once the buffer is mostly full, tether's upstream reader waits for
	// room: three times the detection bound without a frame from the
	// upstream reaching it.
	awaitAppQueued(t, e.srv, buffer/2+2*sendBuffer)
	e.states.expectNone(t, upstream.StateLost, 3*(pingInterval+pingTimeout))
	select {
	case err := <-sent:
		t.Fatalf("upstream sent everything (%v) while the app read nothing: back-pressure was not exercised", err)
	default:
	}
	// The buffer filled up, and no further: what the writer has in flight
	// counts until it is written, and a Send waits for room.
	if q := e.srv.AppQueuedBytes(); len(q) != 1 || q[0] > buffer || q[0] < buffer/2 {
		t.Errorf("bytes queued towards the paused app: %v, want one session with at most DownstreamBufferBytes (%d), most of it used", q, buffer)
	}
	close(es.paused)
	for i := range count {
		if ev := es.next(t); ev.Data != fmt.Sprintf("%d|%s", i, padding) {
			t.Fatalf("event %d: got %d bytes starting %.10q", i, len(ev.Data), ev.Data)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("upstream send: %v", err)
	}
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1", n)
	}
	es.expectOpen(t)
}

// A connection that sends no request, or not all of its headers, is cut
// after HandshakeTimeout, as on a WebSocket listener (slowloris).
func TestSSESlowRequestCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	probe := startLatenessProbe(t)
	up := newUpstream(t, upstreamConfig{})
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.HandshakeTimeout = timeout })
	for _, sent := range []string{"", "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n"} {
		start := time.Now() // before tether's clock starts
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		if _, err := io.WriteString(nc, sent); err != nil {
			t.Fatalf("write: %v", err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(testTimeout))
		_, _ = io.Copy(io.Discard, nc) // until tether closes it
		withinLate(t, probe, "connection cut", time.Since(start), timeout, timeout+slack)
		_ = nc.Close()
	}
	if n := up.srv.Handshakes(); n != 0 {
		t.Errorf("upstream saw %d handshakes, want 0", n)
	}
}

// ServeSSE and ServeKind take the endpoint's path from the listener ("/"
// for a plain one) and refuse one no request could have, closing the
// listener.
func TestSSEServePaths(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	srv, err := proxy.New(baseOptions(t, up.srv.URL(), newStateRecorder()))
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	for _, bad := range []string{"events", "/events?x=1"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		if err := srv.ServeSSE(ln, bad); err == nil || !strings.Contains(err.Error(), "sse:// path") {
			t.Errorf("ServeSSE with path %q: %v, want a refusal", bad, err)
		}
		if _, err := ln.Accept(); err == nil {
			t.Errorf("listener still open after the refusal of path %q", bad)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeKind(ln, proxy.ListenerSSE) }()
	es := openEventSource(t, "http://"+ln.Addr().String()+"/")
	es.nextItem(t)
	es.drop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx, 0); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("ServeKind: %v", err)
	}
}
