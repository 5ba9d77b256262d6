package demo

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/tetherproxy/tether/internal/sse"
)

// The feed opens every stream with its retry, numbers events from 1 with
// id = seq, and resumes a request with Last-Event-ID after that id; each
// request is narrated as the feed answered it.
func TestSSEFeedNumbersAndResumes(t *testing.T) {
	out := newLineWriter()
	f := startTestSSEFeed(t, 200, sseNarrator(out))
	c := testHTTPClient(t)
	s := openRawStream(t, c, f.URL(), "")
	if it := s.next(); it.Kind != sse.KindRetry || it.Retry != sseRetry {
		t.Fatalf("first item %+v, want retry %v", it, sseRetry)
	}
	for want := int64(1); want <= 5; want++ {
		ev, seq := s.event()
		if seq != want || ev.ID != strconv.FormatInt(want, 10) || ev.Type != sse.DefaultType {
			t.Fatalf("event %+v with seq %d, want seq and id %d", ev, seq, want)
		}
	}
	s.stop()
	resumed := openRawStream(t, c, f.URL(), "3")
	if ev, seq := resumed.event(); seq != 4 || ev.ID != "4" {
		t.Errorf("resumed after 3 with %+v (seq %d), want event 4", ev, seq)
	}
	out.waitFor(t, "feed    request #1, no Last-Event-ID: a new stream (retry: 1000, then live events)")
	out.waitFor(t, "feed    request #2 with Last-Event-ID: 3: replaying the ")
	st := f.Stats()
	if st.requests != 2 || st.fresh != 1 || st.resumed != 1 || st.refused != 0 || st.replayed < 2 || f.published() < 5 {
		t.Errorf("stats = %+v, want 2 requests: 1 new, 1 resumed with at least 2 replayed", st)
	}
}

// An overload ends the stream cleanly and refuses the next requests with
// 503 and Retry-After; then the feed serves again.
func TestSSEFeedOverload(t *testing.T) {
	out := newLineWriter()
	f := startTestSSEFeed(t, 200, sseNarrator(out))
	c := testHTTPClient(t)
	s := openRawStream(t, c, f.URL(), "")
	s.event()
	if !f.inject(faultOverload) {
		t.Fatal("overload found no stream")
	}
	if err := s.end(); !isCleanEnd(err) {
		t.Errorf("overloaded stream ended with %v, want a clean end", err)
	}
	for i := range overloadRefusals {
		resp := getStream(t, c, f.URL(), "1")
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != strconv.Itoa(overloadRetryAfter) {
			t.Errorf("request %d: %d Retry-After %q, want 503 Retry-After %d", i+2, resp.StatusCode,
				resp.Header.Get("Retry-After"), overloadRetryAfter)
		}
		_ = resp.Body.Close()
	}
	openRawStream(t, c, f.URL(), "1").event()
	out.waitFor(t, "feed    refused request #2: HTTP 503, Retry-After: 2")
	if st := f.Stats(); st.refused != overloadRefusals || st.resumed != 1 || st.fresh != 1 {
		t.Errorf("stats = %+v, want %d refused, 1 resumed, 1 new", st, overloadRefusals)
	}
}

// Each fault ends the stream its own way.
func TestSSEFeedFaultsBreakTheStream(t *testing.T) {
	tests := []struct {
		name  string
		fault faultKind
		clean bool
	}{
		{"reset", faultReset, false},
		{"drop", faultDrop, false},
		{"end", faultEnd, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startTestSSEFeed(t, 200, nil)
			s := openRawStream(t, testHTTPClient(t), f.URL(), "")
			s.event()
			if !f.inject(tc.fault) {
				t.Fatal("the fault found no stream")
			}
			if err := s.end(); isCleanEnd(err) != tc.clean {
				t.Errorf("stream ended with %v, want a clean end: %v", err, tc.clean)
			}
		})
	}
}

// With no stream open there is nothing to break, and an overload queues
// no refusals.
func TestSSEFeedFaultsWithoutAStream(t *testing.T) {
	f := startTestSSEFeed(t, 200, nil)
	for _, fl := range sseMode().repertoire {
		if f.inject(fl.kind) {
			t.Errorf("%s applied with no stream", fl.name)
		}
	}
	resp := getStream(t, testHTTPClient(t), f.URL(), "")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d after an overload with no stream, want 200", resp.StatusCode)
	}
}

// A hiccup repeats the latest events without id lines: the stream's last
// event id does not move, only the seq says they are repeats.
func TestSSEFeedHiccupRepeats(t *testing.T) {
	f := startTestSSEFeed(t, 200, nil)
	s := openRawStream(t, testHTTPClient(t), f.URL(), "")
	var top int64
	var prevID string
	for top < sseHiccupRepeat {
		var ev sse.Event
		ev, top = s.event()
		prevID = ev.ID
	}
	if !f.inject(faultHiccup) {
		t.Fatal("hiccup found no stream")
	}
	repeats := 0
	for repeats < sseHiccupRepeat {
		ev, seq := s.event()
		if seq > top {
			top, prevID = seq, ev.ID
			continue
		}
		repeats++
		if ev.ID != prevID {
			t.Errorf("repeated event %d carries id %q, want the stream's last id %q unchanged", seq, ev.ID, prevID)
		}
	}
}

// waitHealthy needs exactly one stream open, answering a request made
// after the last fault that broke one: not the stalled stream, and not
// while tether has not given the stalled one up yet.
func TestSSEFeedWaitHealthy(t *testing.T) {
	f := startTestSSEFeed(t, 200, nil)
	c := testHTTPClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	now, stop := context.WithCancel(ctx) // a wait that reports the current health
	stop()

	first := openRawStream(t, c, f.URL(), "")
	first.event()
	if !f.waitHealthy(ctx) {
		t.Fatal("not healthy with one stream")
	}
	if got := f.unstreamed(); got != 0 {
		t.Errorf("unstreamed = %d while one stream streams, want 0", got)
	}
	if !f.inject(faultStall) {
		t.Fatal("stall found no stream")
	}
	if f.waitHealthy(now) {
		t.Error("healthy with only the stalled stream")
	}
	eventually(t, func() bool { return f.unstreamed() > 0 }) // numbered while not healthy
	second := openRawStream(t, c, f.URL(), "1")
	second.event()
	if f.waitHealthy(now) {
		t.Error("healthy while the stalled stream is still open")
	}
	first.stop() // tether gives the stalled stream up
	if !f.waitHealthy(ctx) {
		t.Error("not healthy once the stalled stream is gone")
	}
	down := f.unstreamed()
	for range 20 {
		second.event()
	}
	if got := f.unstreamed(); got != down {
		t.Errorf("unstreamed moved from %d to %d while healthy", down, got)
	}
}

func TestRequestLine(t *testing.T) {
	tests := []struct {
		req  sseRequest
		want string
	}{
		{sseRequest{n: 1, status: 200}, "request #1, no Last-Event-ID: a new stream (retry: 1000, then live events)"},
		{sseRequest{n: 2, status: 503, lastID: "9"}, "refused request #2: HTTP 503, Retry-After: 2"},
		{sseRequest{n: 3, status: 200, lastID: "9"}, "request #3 with Last-Event-ID: 9: nothing was published since; live events follow"},
		{sseRequest{n: 4, status: 200, lastID: "9", replayed: 1}, "request #4 with Last-Event-ID: 9: replaying the 1 event it missed (10), then live"},
		{sseRequest{n: 5, status: 200, lastID: "9", replayed: 23}, "request #5 with Last-Event-ID: 9: replaying the 23 events it missed (10–32), then live"},
		{sseRequest{n: 6, status: 200, lastID: "9", replayed: 5, gapFrom: 10, gapTo: 20},
			"request #6 with Last-Event-ID: 9: events 10–20 are no longer kept; replaying 5 events from 21"},
		{sseRequest{n: 7, status: 200, lastID: "x", foreign: true},
			"request #7 with Last-Event-ID: x, not one of the feed's ids: a new stream"},
	}
	for _, tc := range tests {
		if got := requestLine(tc.req); got != tc.want {
			t.Errorf("requestLine(%+v)\n got %q\nwant %q", tc.req, got, tc.want)
		}
	}
}
