package ssetest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
)

func event(typ, data, id string) sse.Item {
	if typ == "" {
		typ = sse.DefaultType
	}
	return sse.Item{Kind: sse.KindEvent, Event: sse.Event{Type: typ, Data: data, ID: id}}
}

func comment(text string) sse.Item { return sse.Item{Kind: sse.KindComment, Comment: text} }

func retry(d time.Duration) sse.Item { return sse.Item{Kind: sse.KindRetry, Retry: d} }

func expect(t *testing.T, ctx context.Context, cl *client, want ...sse.Item) {
	t.Helper()
	for i, w := range want {
		if got := cl.next(t, ctx); !reflect.DeepEqual(got, w) {
			t.Fatalf("item %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestPublishLive(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	cl := connect(t, ctx, newClient(t), s.URL()+"/events", nil)
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ids := []uint64{
		s.Publish(Event{Data: "one"}),
		s.Publish(Event{Type: "update", Data: "line 1\nline 2\r\nline 3\rline 4"}),
		s.Publish(Event{Data: ""}),
		s.Publish(Event{Data: "no id", OmitID: true}),
		s.Publish(Event{Data: " spaced"}),
	}
	if want := []uint64{1, 2, 3, 4, 5}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	expect(t, ctx, cl,
		event("", "one", "1"),
		event("update", "line 1\nline 2\nline 3\nline 4", "2"),
		event("", "", "3"),
		event("", "no id", "3"), // the last event ID persists
		event("", " spaced", "5"),
	)
	if s.LastID() != 5 {
		t.Errorf("LastID = %d, want 5", s.LastID())
	}
}

func TestResume(t *testing.T) {
	cases := []struct {
		name        string
		history     int
		lastEventID string
		wantIDs     []string
		gapFrom     uint64
		gapTo       uint64
	}{
		{name: "no header: live only", history: 10},
		{name: "after an id in the history", history: 10, lastEventID: "2", wantIDs: []string{"3", "4", "5", "6"}},
		{name: "after the oldest kept", history: 3, lastEventID: "3", wantIDs: []string{"4", "5", "6"}},
		{name: "older than the history: gap", history: 3, lastEventID: "1", wantIDs: []string{"4", "5", "6"}, gapFrom: 2, gapTo: 3},
		{name: "zero: everything lost before the history", history: 2, lastEventID: "0", wantIDs: []string{"5", "6"}, gapFrom: 1, gapTo: 4},
		{name: "up to date", history: 10, lastEventID: "6"},
		{name: "from the future", history: 10, lastEventID: "99"},
		{name: "not a number", history: 10, lastEventID: "abc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			s := newServer(t, Options{History: tc.history})
			for i := range 6 {
				s.Publish(Event{Data: "e" + string(rune('1'+i))})
			}
			h := header{}
			if tc.lastEventID != "" {
				h["Last-Event-ID"] = tc.lastEventID
			}
			cl := connect(t, ctx, newClient(t), s.URL(), h)
			for _, id := range tc.wantIDs {
				expect(t, ctx, cl, event("", "e"+id, id))
			}
			// A live event right after proves nothing else was replayed.
			if err := s.WaitStreams(ctx, 1); err != nil {
				t.Fatal(err)
			}
			s.Publish(Event{Data: "live"})
			expect(t, ctx, cl, event("", "live", "7"))
			req := s.Requests()[0]
			if req.LastEventID != tc.lastEventID || req.Replayed != len(tc.wantIDs) || req.GapFrom != tc.gapFrom || req.GapTo != tc.gapTo {
				t.Errorf("request = %+v, want Last-Event-ID %q, replayed %d, gap %d-%d",
					req, tc.lastEventID, len(tc.wantIDs), tc.gapFrom, tc.gapTo)
			}
		})
	}
}

func TestRetryAndComments(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{Retry: 1500 * time.Millisecond, CommentEvery: 2})
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	expect(t, ctx, cl, retry(1500*time.Millisecond))
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Publish(Event{Data: "a"})
	s.Publish(Event{Data: "b"})
	if n := s.Retry(250 * time.Millisecond); n != 1 {
		t.Errorf("Retry reached %d streams, want 1", n)
	}
	s.Comment("two\nlines")
	s.Publish(Event{Data: "c"})
	expect(t, ctx, cl,
		event("", "a", "1"), event("", "b", "2"), comment("after event 2"),
		retry(250*time.Millisecond), comment("two"), comment("lines"),
		event("", "c", "3"),
	)
	if d, ok := cl.r.Retry(); !ok || d != 250*time.Millisecond {
		t.Errorf("reader retry = %v, %v", d, ok)
	}
}

// TestHeartbeat: an idle stream gets a comment every Heartbeat, never
// earlier than that after the last write.
func TestHeartbeat(t *testing.T) {
	const beat = 20 * time.Millisecond
	ctx := testContext(t)
	s := newServer(t, Options{Heartbeat: beat})
	start := time.Now()
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	for range 3 {
		expect(t, ctx, cl, comment("keep-alive"))
	}
	if elapsed := time.Since(start); elapsed < 3*beat {
		t.Errorf("3 heartbeats after %v, want at least %v", elapsed, 3*beat)
	}
}

func TestEndAll(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	c := newClient(t)
	a, b := connect(t, ctx, c, s.URL(), nil), connect(t, ctx, c, s.URL(), nil)
	if err := s.WaitStreams(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s.Publish(Event{Data: "x"})
	expect(t, ctx, a, event("", "x", "1"))
	expect(t, ctx, b, event("", "x", "1"))
	if n := s.EndAll(); n != 2 {
		t.Errorf("EndAll ended %d, want 2", n)
	}
	for _, cl := range []*client{a, b} {
		if err := cl.end(t, ctx); !isEOF(err) {
			t.Errorf("clean end: %v, want io.EOF", err)
		}
	}
	if s.Streams() != 0 {
		t.Errorf("Streams = %d after EndAll", s.Streams())
	}
}

func TestDropAll(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Publish(Event{Data: "x"})
	expect(t, ctx, cl, event("", "x", "1"))
	if n := s.DropAll(); n != 1 {
		t.Errorf("DropAll dropped %d, want 1", n)
	}
	// A chunked body cut without its final chunk.
	if err := cl.end(t, ctx); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("dropped stream: %v, want an unexpected EOF", err)
	}
	if err := s.WaitStreams(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

func TestResetAll(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.ResetAll()
	// Either the RST itself or the cut body, depending on what the client
	// was doing when it arrived; never a clean end.
	if err := cl.end(t, ctx); err == nil || isEOF(err) {
		t.Errorf("reset stream: %v, want a connection error", err)
	}
}

// TestStallAll: a stalled stream writes nothing, heartbeats included, while
// its connection stays open; streams opened afterwards are served.
func TestStallAll(t *testing.T) {
	const beat = 10 * time.Millisecond
	ctx := testContext(t)
	s := newServer(t, Options{Heartbeat: beat})
	c := newClient(t)
	stalled := connect(t, ctx, c, s.URL(), nil)
	expect(t, ctx, stalled, comment("keep-alive"))
	if n := s.StallAll(); n != 1 {
		t.Fatalf("StallAll stalled %d, want 1", n)
	}
	s.Publish(Event{Data: "lost"})
	// Without the stall a heartbeat would arrive every 10ms; allow for one
	// already written before the stall took hold.
	drainHeartbeats(t, stalled, 20*beat)
	if s.Streams() != 1 {
		t.Errorf("Streams = %d, want the stalled one still open", s.Streams())
	}
	fresh := connect(t, ctx, c, s.URL(), header{"Last-Event-ID": "0"})
	expect(t, ctx, fresh, event("", "lost", "1"))
	s.DropAll()
	if err := stalled.end(t, ctx); err == nil || isEOF(err) {
		t.Errorf("dropped stalled stream: %v", err)
	}
}

// drainHeartbeats accepts heartbeats already in flight, then requires
// silence for d.
func drainHeartbeats(t *testing.T, cl *client, d time.Duration) {
	t.Helper()
	for {
		timer := time.NewTimer(d)
		select {
		case res := <-cl.ch:
			timer.Stop()
			if res.err != nil || !reflect.DeepEqual(res.item, comment("keep-alive")) {
				t.Fatalf("stalled stream sent %+v, %v", res.item, res.err)
			}
			continue
		case <-timer.C:
			return
		}
	}
}

func TestRespondNext(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	c := newClient(t)
	s.RespondNext(1, Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"2"}}, Body: "busy"})
	s.RespondNext(1, Response{Status: http.StatusNoContent})
	s.RespondNext(2, Response{Status: http.StatusUnauthorized, Header: http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}}})
	s.RespondNext(1, Response{Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>"})
	want := []struct {
		status int
		header string
		value  string
		body   string
	}{
		{503, "Retry-After", "2", "busy"},
		{204, "", "", ""},
		{401, "WWW-Authenticate", `Bearer error="invalid_token"`, ""},
		{401, "WWW-Authenticate", `Bearer error="invalid_token"`, ""},
		{200, "Content-Type", "text/html", "<html>"},
	}
	for i, w := range want {
		resp := get(t, ctx, c, s.URL(), header{"Authorization": "Bearer t" + string(rune('0'+i))})
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != w.status || (w.header != "" && resp.Header.Get(w.header) != w.value) || string(body) != w.body {
			t.Errorf("request %d: %d %v %q, want %d %s=%q %q", i, resp.StatusCode, resp.Header, body, w.status, w.header, w.value, w.body)
		}
	}
	cl := connect(t, ctx, c, s.URL(), header{"Authorization": "Bearer t5"})
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Publish(Event{Data: "finally"})
	expect(t, ctx, cl, event("", "finally", "1"))
	reqs := s.Requests()
	for i, r := range reqs {
		wantStatus := 200
		if i < len(want) {
			wantStatus = want[i].status
		}
		if r.N != i+1 || r.Status != wantStatus || r.Header.Get("Authorization") != "Bearer t"+string(rune('0'+i)) {
			t.Errorf("request %d recorded as %+v", i, r)
		}
	}
}

// TestRespondStall: an upstream that accepts and never sends a byte.
func TestRespondStall(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{Heartbeat: 5 * time.Millisecond})
	s.RespondNext(1, Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Stall: true})
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	cl.silent(t, 20*5*time.Millisecond)
	if s.Streams() != 0 {
		t.Errorf("a held response counts as a stream")
	}
	if n := s.DropAll(); n != 1 {
		t.Errorf("DropAll ended %d, want the held response", n)
	}
	if err := cl.end(t, ctx); err == nil || isEOF(err) {
		t.Errorf("dropped held response: %v", err)
	}
}

// TestRequestTimes: arrival times come from Options.Now, so a test can
// measure the spread of a client's reconnects.
func TestRequestTimes(t *testing.T) {
	ctx := testContext(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ticks int
	s := newServer(t, Options{Now: func() time.Time { ticks++; return base.Add(time.Duration(ticks) * time.Second) }})
	c := newClient(t)
	s.RespondNext(3, Response{Status: http.StatusServiceUnavailable})
	for range 3 {
		resp := get(t, ctx, c, s.URL(), nil)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	reqs, err := s.WaitRequests(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if want := base.Add(time.Duration(i+1) * time.Second); !r.Time.Equal(want) {
			t.Errorf("request %d at %v, want %v", i, r.Time, want)
		}
		if r.RemoteAddr == "" {
			t.Errorf("request %d has no RemoteAddr", i)
		}
	}
}

// TestLineEnds: the same events with CR and CRLF line ends read the same,
// and the bytes on the wire use the configured line end.
func TestLineEnds(t *testing.T) {
	for _, le := range []string{"\n", "\r", "\r\n"} {
		t.Run(strings.NewReplacer("\r", "CR", "\n", "LF").Replace(le), func(t *testing.T) {
			ctx := testContext(t)
			s := newServer(t, Options{LineEnd: le, Retry: time.Second})
			for _, d := range []string{"a\nb", ""} {
				s.Publish(Event{Type: "t", Data: d})
			}
			resp := get(t, ctx, newClient(t), s.URL(), header{"Last-Event-ID": "0"})
			t.Cleanup(func() { _ = resp.Body.Close() })
			want := "retry: 1000" + le + "id: 1" + le + "event: t" + le + "data: a" + le + "data: b" + le + le +
				"id: 2" + le + "event: t" + le + "data: " + le + le
			got := make([]byte, len(want))
			if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != want {
				t.Fatalf("wire = %q, %v; want %q", got, err, want)
			}
			r := sse.NewReader(strings.NewReader(string(got)), sse.Options{})
			var items []sse.Item
			for {
				it, err := r.Next()
				if err != nil {
					break
				}
				items = append(items, it)
			}
			wantItems := []sse.Item{retry(time.Second), event("t", "a\nb", "1"), event("t", "", "2")}
			if !reflect.DeepEqual(items, wantItems) {
				t.Errorf("items = %+v, want %+v", items, wantItems)
			}
		})
	}
}

// TestRaw sends bytes a well-behaved server would not.
func TestRaw(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{})
	cl := connect(t, ctx, newClient(t), s.URL(), nil)
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Raw("id: 7\x00\ndata:x\r\n\r\nretry: soon\ndata\n\n")
	expect(t, ctx, cl, event("", "x", ""), event("", "", ""))
}

// TestCloseEndsEverything: Close returns with streams, stalled streams and
// held responses open (goleak checks that their goroutines are gone), and
// is idempotent.
func TestCloseEndsEverything(t *testing.T) {
	ctx := testContext(t)
	s := NewServer(Options{Heartbeat: time.Millisecond})
	c := newClient(t)
	a := connect(t, ctx, c, s.URL(), nil)
	_ = connect(t, ctx, c, s.URL(), nil)
	if err := s.WaitStreams(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s.StallAll()
	s.RespondNext(1, Response{Stall: true})
	held := get(t, ctx, c, s.URL(), nil)
	t.Cleanup(func() { _ = held.Body.Close() })
	if _, err := s.WaitRequests(ctx, 3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	if err := a.end(t, ctx); err == nil || isEOF(err) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := http.Get(s.URL()); err == nil {
		t.Error("the server still answers after Close")
	} else if !errors.As(err, new(*net.OpError)) {
		t.Logf("after Close: %v", err)
	}
}
