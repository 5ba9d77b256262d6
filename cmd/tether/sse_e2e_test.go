package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
)

// feedData is the data of the feed's event n: JSON carrying its number.
func feedData(n int) string { return fmt.Sprintf(`{"seq":%d,"v":"e%d"}`, n, n) }

// feedMessage is the message the app gets for event n in TETHER_SSE_FORMAT
// format (the ssetest server numbers events from 1, so n is also its id).
func feedMessage(format string, n int) string {
	if format == "data" {
		return feedData(n)
	}
	data, _ := json.Marshal(feedData(n))
	return fmt.Sprintf(`{"id":"%d","event":"message","data":%s}`, n, data)
}

// sseFeed is an SSE upstream with a bounded history and an HTTP catch-up
// endpoint answering NDJSON in the app's message format, both real servers.
type sseFeed struct {
	t        *testing.T
	srv      *ssetest.Server
	catchUp  *httptest.Server
	catchUps atomic.Int32
	next     int // the number of the next event
}

func newSSEFeed(t *testing.T, format string, opts ssetest.Options) *sseFeed {
	t.Helper()
	f := &sseFeed{t: t, srv: ssetest.NewServer(opts), next: 1}
	t.Cleanup(f.srv.Close)
	f.catchUp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.catchUps.Add(1)
		from, err1 := strconv.Atoi(r.URL.Query().Get("from"))
		to, err2 := strconv.Atoi(r.URL.Query().Get("to"))
		if err1 != nil || err2 != nil || from > to {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		for n := from; n <= to; n++ {
			_, _ = fmt.Fprintln(w, feedMessage(format, n))
		}
	}))
	t.Cleanup(f.catchUp.Close)
	return f
}

// publish publishes the next k events and returns the first one's number.
func (f *sseFeed) publish(k int) int {
	first := f.next
	for range k {
		if id := f.srv.Publish(ssetest.Event{Data: feedData(f.next)}); id != uint64(f.next) {
			f.t.Fatalf("published event %d as id %d", f.next, id)
		}
		f.next++
	}
	return first
}

func (f *sseFeed) waitStreams(n int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := f.srv.WaitStreams(ctx, n); err != nil {
		f.t.Fatalf("%d live streams not reached within %v", n, waitLimit)
	}
}

func (f *sseFeed) waitRequests(n int) []ssetest.Request {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	reqs, err := f.srv.WaitRequests(ctx, n)
	if err != nil {
		f.t.Fatalf("%d requests not reached within %v", n, waitLimit)
	}
	return reqs
}

// TestSSEUpstreamEndToEnd: a WebSocket app behind tether reads an SSE feed
// while the feed's connections are dropped, reset, stalled, ended, and
// finally refused for longer than the server's history lasts. The app's
// socket never closes and it sees every event exactly once, in order:
// resumed with Last-Event-ID, deduplicated by sequence number, and the gap
// the history could not cover fetched over HTTP. Both message formats.
func TestSSEUpstreamEndToEnd(t *testing.T) {
	for _, tt := range []struct{ format, seqPath string }{
		{"data", "seq"},
		{"json", "data|@fromstr|seq"},
		{"json", "id"}, // the event id, a quoted integer in the json shape
	} {
		t.Run(tt.format+"/"+tt.seqPath, func(t *testing.T) { runSSEFeed(t, tt.format, tt.seqPath) })
	}
}

func runSSEFeed(t *testing.T, format, seqPath string) {
	const history = 4
	feed := newSSEFeed(t, format, ssetest.Options{History: history, Heartbeat: 30 * time.Millisecond, CommentEvery: 3})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":  feed.srv.URL() + "/events",
		"TETHER_SSE_FORMAT":    format,
		"TETHER_SEQ_PATH":      seqPath,
		"TETHER_GAPFILL_URL":   feed.catchUp.URL + "/catchup?from={{.From}}&to={{.To}}",
		"TETHER_PING_INTERVAL": "150ms",
		"TETHER_PING_TIMEOUT":  "150ms",
	})
	app := dialTestApp(t, r.appURL)
	expect := func(from, to int) {
		t.Helper()
		for n := from; n <= to; n++ {
			app.expect(t, feedMessage(format, n))
		}
	}
	requests := 1
	feed.waitStreams(1)
	expect(feed.publish(3), 3)

	faults := []struct {
		name string
		do   func() int
	}{
		{"drop", feed.srv.DropAll},
		{"reset", feed.srv.ResetAll},
		{"stall", feed.srv.StallAll},
		{"clean end", feed.srv.EndAll},
	}
	for _, f := range faults {
		if n := f.do(); n != 1 {
			t.Fatalf("%s: %d streams, want 1", f.name, n)
		}
		first := feed.publish(2) // while tether reconnects: replayed, or live
		requests++
		feed.waitRequests(requests)
		feed.publish(1)
		expect(first, feed.next-1)
	}

	// The next request is refused for a second; meanwhile more events are
	// published than the history keeps, so the resumed stream starts past a
	// gap that only the catch-up endpoint can fill.
	feed.srv.RespondNext(1, ssetest.Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"1"}}})
	feed.srv.DropAll()
	requests++
	feed.waitRequests(requests) // the 503: tether now waits a second
	first := feed.publish(2 * history)
	requests++
	resumed := feed.waitRequests(requests)[requests-1]
	expect(first, feed.next-1)
	if resumed.GapFrom == 0 || feed.catchUps.Load() == 0 {
		t.Errorf("resumed with Last-Event-ID %q: history gap %d-%d, %d catch-up requests; want a gap filled over HTTP",
			resumed.LastEventID, resumed.GapFrom, resumed.GapTo, feed.catchUps.Load())
	}
	for _, req := range feed.srv.Requests()[1:] {
		if req.LastEventID == "" {
			t.Errorf("request %d resumed without Last-Event-ID", req.N)
		}
	}
	select {
	case ev := <-app.msgs:
		t.Errorf("app got %+v after the last event", ev)
	default:
	}
}

// TestReadyRequiresSSEUpstream: with TETHER_READY_REQUIRES_UPSTREAM, /readyz
// requests the event stream and ends it once the headers show one; a feed
// that answers 204 makes tether unready with that reason.
func TestReadyRequiresSSEUpstream(t *testing.T) {
	feed := newSSEFeed(t, "json", ssetest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":            feed.srv.URL(),
		"TETHER_READY_REQUIRES_UPSTREAM": "true",
	})
	awaitReadyz(t, r.adminURL, func(code int, _ string) bool { return code == http.StatusOK })
	if req := feed.waitRequests(1)[0]; req.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("probe request Accept %q, want text/event-stream", req.Header.Get("Accept"))
	}
	feed.waitStreams(0)

	stopping := newSSEFeed(t, "json", ssetest.Options{})
	stopping.srv.RespondNext(100, ssetest.Response{Status: http.StatusNoContent})
	down := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":            stopping.srv.URL(),
		"TETHER_READY_REQUIRES_UPSTREAM": "true",
	})
	code, body := awaitReadyz(t, down.adminURL, func(_ int, body string) bool { return body != "not listening" })
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream asked to stop (HTTP 204)") {
		t.Errorf("/readyz = %d %q with the feed answering 204, want 503 with the reason", code, body)
	}
}

// TestSSEStopReachesApp: a feed that answers its first request with 204
// refuses the app's handshake with 502 and the reason; one that answers 204
// later closes the connected app with 1011.
func TestSSEStopReachesApp(t *testing.T) {
	feed := newSSEFeed(t, "json", ssetest.Options{})
	feed.srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
	r := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": feed.srv.URL()})
	status, body := refusedDial(t, r.appURL)
	if status != http.StatusBadGateway || !strings.Contains(body, "upstream asked to stop (HTTP 204)") {
		t.Errorf("app handshake answered %d %q, want 502 with the reason", status, body)
	}

	app := dialTestApp(t, r.appURL)
	feed.waitStreams(1)
	feed.srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
	feed.srv.DropAll()
	app.expectClose(t, 1011)
}

// refusedDial performs a WebSocket handshake that must be refused, and
// returns the HTTP status and body of the refusal.
func refusedDial(t *testing.T, url string) (int, string) {
	t.Helper()
	var status int
	var body string
	d := ws.Dialer{OnStatusError: func(code int, _ []byte, resp io.Reader) {
		status = code
		r, err := http.ReadResponse(bufio.NewReader(resp), nil)
		if err != nil {
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, _, _, err := d.Dial(ctx, url)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("app handshake accepted, want a refusal")
	}
	return status, body
}
