package proxy_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// sseSource is an SSE upstream publishing one numbered event every
// millisecond: event n has the data "n" and a second line, and every
// third one the type "tick".
type sseSource struct {
	*ssetest.Server
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	last uint64
}

func newSSESource(t *testing.T) *sseSource {
	t.Helper()
	s := &sseSource{Server: ssetest.NewServer(ssetest.Options{History: 1 << 16}),
		stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		s.halt()
		s.Close()
	})
	return s
}

func sourceEvent(n uint64) ssetest.Event {
	ev := ssetest.Event{Data: strconv.FormatUint(n, 10) + "\nsecond line"}
	if n%3 == 0 {
		ev.Type = "tick"
	}
	return ev
}

// start publishes until halt.
func (s *sseSource) start() {
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.mu.Lock()
				s.last++
				n := s.last
				s.mu.Unlock()
				s.Publish(sourceEvent(n))
			}
		}
	}()
}

func (s *sseSource) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	select {
	case <-s.done:
	case <-time.After(testTimeout):
	}
}

func (s *sseSource) head() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// sseUpstream points tether at an SSE upstream.
func sseUpstream(url string, format upstream.SSEFormat) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Upstream.URL = url + "/feed"
		o.Upstream.Kind = upstream.KindSSE
		o.Upstream.SSEFormat = format
	}
}

// sourceView checks what an EventSource reads of an sseSource through
// tether: the upstream's events, type and data as published (every type
// "message" with TETHER_SSE_FORMAT=data), numbered consecutively from 1,
// each once, and each with the upstream's id (ssetest numbers its events
// from 1).
type sourceView struct {
	last uint64
	data bool // TETHER_SSE_FORMAT=data
}

func (v *sourceView) until(t *testing.T, es *eventSource, n uint64) {
	t.Helper()
	for v.last < n {
		ev := es.next(t)
		want := sourceEvent(v.last + 1)
		if want.Type == "" || v.data {
			want.Type = "message"
		}
		id := strconv.FormatUint(v.last+1, 10)
		if ev.Type != want.Type || ev.Data != want.Data || ev.ID != id {
			t.Fatalf("got %q %q id %q after event %d, want %q %q id %s: gap, duplicate or altered event",
				ev.Type, ev.Data, ev.ID, v.last, want.Type, want.Data, id)
		}
		v.last++
	}
}

// An SSE upstream behind an sse:// listener: the EventSource reads the
// upstream's events with their own types and multi-line data, while the
// upstream ends its responses, drops and resets its connections and goes
// silent; tether resumes it with Last-Event-ID each time, and the
// EventSource reads every event once, in order, on one request that never
// ends.
func TestSSEUpstreamToSSEApp(t *testing.T) {
	src := newSSESource(t)
	e := newSSETether(t, src.URL(), sseUpstream(src.URL(), upstream.SSEJSON))
	es := openEventSource(t, e.url)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := src.WaitStreams(ctx, 1); err != nil {
		t.Fatalf("no upstream stream: %v", err)
	}
	src.start()
	var v sourceView
	v.until(t, es, 20)
	faults := []struct {
		name  string
		apply func() int
	}{
		{"end", src.EndAll},
		{"drop", src.DropAll},
		{"reset", src.ResetAll},
		{"silence", src.StallAll},
	}
	for i, f := range faults {
		if n := f.apply(); n != 1 {
			t.Fatalf("%s: %d streams broken, want 1", f.name, n)
		}
		reqs, err := src.WaitRequests(ctx, i+2)
		if err != nil {
			t.Fatalf("%s: no reconnection: %v", f.name, err)
		}
		if r := reqs[i+1]; r.LastEventID == "" || r.GapFrom != 0 {
			t.Fatalf("%s: reconnected with Last-Event-ID %q (gap %d-%d), want a resume", f.name, r.LastEventID, r.GapFrom, r.GapTo)
		}
		v.until(t, es, src.head()+20)
	}
	es.expectOpen(t)
	if es.requests != 1 {
		t.Errorf("the EventSource made %d requests, want 1", es.requests)
	}
}

// With TETHER_SSE_FORMAT=data the upstream's messages are its events'
// data only: an sse:// app gets them as plain "message" events.
func TestSSEUpstreamDataFormat(t *testing.T) {
	src := newSSESource(t)
	e := newSSETether(t, src.URL(), sseUpstream(src.URL(), upstream.SSEData))
	es := openEventSource(t, e.url)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := src.WaitStreams(ctx, 1); err != nil {
		t.Fatalf("no upstream stream: %v", err)
	}
	src.Publish(ssetest.Event{Type: "tick", Data: "a\nb"})
	if ev := es.next(t); ev.Type != "message" || ev.Data != "a\nb" {
		t.Fatalf("got %q %q, want message \"a\\nb\"", ev.Type, ev.Data)
	}
}

// A WebSocket app in front of an SSE upstream reads its events as JSON
// text messages; what it sends has nowhere to go: each message is dropped
// and counted (read_only), the app stays open, and nothing piles up in the
// outbox to close it later.
func TestWebSocketAppWithSSEUpstream(t *testing.T) {
	src := newSSESource(t)
	m := newCounts()
	e := newTether(t, src.URL(), func(o *proxy.Options) {
		sseUpstream(src.URL(), upstream.SSEJSON)(o)
		o.Metrics = m
		o.OutboxMaxMessages = 4
	})
	a := dialApp(t, e.url, appOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := src.WaitStreams(ctx, 1); err != nil {
		t.Fatalf("no upstream stream: %v", err)
	}
	const sent = 10 // more than the outbox holds
	for i := range sent {
		a.sendText(t, "hello "+strconv.Itoa(i))
	}
	m.await(t, "app dropped read_only", sent)
	id := src.Publish(ssetest.Event{Type: "tick", Data: "1"})
	var got struct{ ID, Event, Data string }
	msg := a.next(t)
	if msg.op != ws.OpText || json.Unmarshal(msg.data, &got) != nil ||
		got.ID != strconv.FormatUint(id, 10) || got.Event != "tick" || got.Data != "1" {
		t.Fatalf("app got %v %q, want the event as JSON", msg.op, msg.data)
	}
	a.expectOpen(t)
	if n := e.srv.OutboxMessages(); n != 0 {
		t.Errorf("%d messages queued for an upstream that takes none", n)
	}
	if reqs := src.Requests(); len(reqs) != 1 {
		t.Errorf("upstream saw %d requests, want 1: dropping messages must not cost the connection", len(reqs))
	}
}

// sseFormats runs a test in each TETHER_SSE_FORMAT: an SSE upstream's ids
// reach an sse:// app in both.
func sseFormats(t *testing.T, test func(t *testing.T, format upstream.SSEFormat)) {
	for _, f := range []upstream.SSEFormat{upstream.SSEJSON, upstream.SSEData} {
		t.Run(f.String(), func(t *testing.T) { test(t, f) })
	}
}

// An EventSource that read the SSE upstream directly before comes to tether
// with the upstream's own id as Last-Event-ID. It is not one of tether's
// ids, but with an SSE upstream it needs no tether-gap: the new session's
// upstream is asked to resume after it, and the app reads on from the next
// event, once each, with the upstream's ids.
func TestSSEAppResumesUpstreamID(t *testing.T) {
	sseFormats(t, func(t *testing.T, format upstream.SSEFormat) {
		src := newSSESource(t)
		for n := uint64(1); n <= 10; n++ {
			src.Publish(sourceEvent(n))
		}
		src.mu.Lock()
		src.last = 10
		src.mu.Unlock()
		m := newCounts()
		e := newSSETether(t, src.URL(), func(o *proxy.Options) {
			sseUpstream(src.URL(), format)(o)
			o.Metrics = m
		})
		es := newEventSource(t, e.url, nil)
		es.lastID = "5"
		es.connect(t)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		reqs, err := src.WaitRequests(ctx, 1)
		if err != nil {
			t.Fatalf("no upstream request: %v", err)
		}
		if got := reqs[0].LastEventID; got != "5" {
			t.Fatalf("upstream's first request carried Last-Event-ID %q, want the app's \"5\"", got)
		}
		v := sourceView{last: 5, data: format == upstream.SSEData}
		v.until(t, es, 10) // a tether-gap event here fails: its type, data or id is not the source's
		src.start()
		v.until(t, es, src.head()+5)
		es.expectOpen(t)
		m.await(t, "sse resume upstream", 1)
	})
}

// An sse:// app reads an SSE upstream's events with the upstream's own ids
// (tether writes its own only where the upstream has none), in either
// format: what it records or compares is what the server sent. When it
// reconnects with one of them as Last-Event-ID, the session that holds the
// event resumes after it from its buffer: no new upstream request, nothing
// lost or repeated.
func TestSSEAppKeepsUpstreamIDs(t *testing.T) {
	sseFormats(t, func(t *testing.T, format upstream.SSEFormat) {
		src := newSSESource(t)
		m := newCounts()
		e := newSSETether(t, src.URL(), func(o *proxy.Options) {
			sseUpstream(src.URL(), format)(o)
			o.Metrics = m
		})
		es := openEventSource(t, e.url)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := src.WaitStreams(ctx, 1); err != nil {
			t.Fatalf("no upstream stream: %v", err)
		}
		v := sourceView{data: format == upstream.SSEData}
		for n := uint64(1); n <= 10; n++ {
			src.Publish(sourceEvent(n))
		}
		v.until(t, es, 10)

		es.drop()
		for n := uint64(11); n <= 15; n++ {
			src.Publish(sourceEvent(n))
		}
		es.connect(t) // Last-Event-ID: 10, the upstream's
		v.until(t, es, 15)
		if got := len(src.Requests()); got != 1 {
			t.Errorf("the upstream got %d requests, want 1: the session's buffer resumed the app", got)
		}
		es.expectOpen(t)
		m.await(t, "sse resume resumed", 1)
	})
}
