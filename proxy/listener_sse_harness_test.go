package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// ssePath is the path the test sse:// listeners serve.
const ssePath = "/events"

// sseLinger is the linger time of the test sse:// listeners: long enough
// for a test's reconnection, short enough to wait out.
const sseLinger = 2 * time.Second

// sseEnv is a proxy.Server serving an sse:// listener at ssePath.
type sseEnv struct {
	srv    *proxy.Server
	states *stateRecorder
	addr   string
	url    string // http://addr/events
	served chan error
}

func newSSETether(t *testing.T, upstreamURL string, mutate func(*proxy.Options)) *sseEnv {
	t.Helper()
	return newSSETetherOn(t, upstreamURL, mutate, nil)
}

// newSSETetherOn is newSSETether with the listener wrapped by wrapLn, when
// not nil.
func newSSETetherOn(t *testing.T, upstreamURL string, mutate func(*proxy.Options),
	wrapLn func(net.Listener) net.Listener) *sseEnv {
	t.Helper()
	states := newStateRecorder()
	opts := baseOptions(t, upstreamURL, states)
	opts.SSELinger = sseLinger
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := proxy.New(opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	e := &sseEnv{srv: srv, states: states, addr: ln.Addr().String(), served: make(chan error, 1)}
	e.url = "http://" + e.addr + ssePath
	if wrapLn != nil {
		ln = wrapLn(ln)
	}
	go func() { e.served <- srv.ServeKind(&proxy.SSEListener{Listener: ln, Path: ssePath}, proxy.ListenerSSE) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx, 0); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-e.served; err != nil {
			t.Errorf("ServeKind: %v", err)
		}
	})
	return e
}

// sendBufferListener fixes the send buffer (SO_SNDBUF) of every connection
// it accepts, which also stops the kernel from growing it: a test then knows
// how much of what tether writes the kernel can still take, twice bytes at
// most on Linux (which doubles the value set, for its bookkeeping).
type sendBufferListener struct {
	net.Listener
	bytes int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if serr := tc.SetWriteBuffer(l.bytes); serr != nil {
			_ = tc.Close()
			return nil, fmt.Errorf("set the send buffer of an accepted connection: %w", serr)
		}
	}
	return c, err
}

func (e *sseEnv) expectSessions(t *testing.T, n int) {
	t.Helper()
	eventually(t, "Sessions() == "+strconv.Itoa(n), func() bool { return e.srv.Sessions() == n })
}

// ---- an EventSource ----

// eventSource reads an sse:// stream as a browser's EventSource does: it
// holds the last event id (set by events and id-only blocks) and sends it
// as Last-Event-ID when it reconnects. Its reader goroutine hands what it
// parses to the test; anything read but not taken when the connection is
// dropped is lost with it, as a browser loses what it had not dispatched.
type eventSource struct {
	url    string
	header http.Header
	tr     *http.Transport

	lastID   string
	requests int
	comments int
	conn     *sseConn
	// paused, when set, holds the next connection's reader until it is
	// closed: an app that reads nothing.
	paused chan struct{}
}

// sseConn is one request of an eventSource.
type sseConn struct {
	resp   *http.Response
	items  chan sse.Item
	ended  chan error // the stream's end, once
	cancel context.CancelFunc
	done   chan struct{} // the reader goroutine has exited
}

// sseAnswer is a request tether refused or answered unexpectedly.
type sseAnswer struct {
	status int
	header http.Header
	body   string
}

func newEventSource(t *testing.T, url string, header http.Header) *eventSource {
	tr := &http.Transport{}
	es := &eventSource{url: url, header: header, tr: tr}
	t.Cleanup(func() {
		es.drop()
		tr.CloseIdleConnections()
	})
	return es
}

// openEventSource connects and fails unless the stream opens.
func openEventSource(t *testing.T, url string) *eventSource {
	t.Helper()
	es := newEventSource(t, url, nil)
	es.connect(t)
	return es
}

// try sends the request; it returns the refusal when tether does not
// answer with an event stream.
func (es *eventSource) try(t *testing.T) *sseAnswer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, es.url, nil)
	if err != nil {
		cancel()
		t.Fatalf("request: %v", err)
	}
	for k, v := range es.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if es.lastID != "" {
		req.Header.Set("Last-Event-ID", es.lastID)
	}
	es.requests++
	resp, err := (&http.Client{Transport: es.tr, Timeout: 0}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", es.url, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		cancel()
		return &sseAnswer{status: resp.StatusCode, header: resp.Header, body: string(body)}
	}
	c := &sseConn{resp: resp, items: make(chan sse.Item, 1<<14), ended: make(chan error, 1),
		cancel: cancel, done: make(chan struct{})}
	go c.read(ctx, es.lastID, es.paused)
	es.conn = c
	return nil
}

// connect opens the stream and fails unless tether answers 200 with an
// event stream.
func (es *eventSource) connect(t *testing.T) {
	t.Helper()
	if a := es.try(t); a != nil {
		t.Fatalf("GET %s answered %d %q, want an event stream", es.url, a.status, a.body)
	}
}

func (c *sseConn) read(ctx context.Context, lastID string, paused <-chan struct{}) {
	defer close(c.done)
	if paused != nil {
		select {
		case <-paused:
		case <-ctx.Done():
			c.ended <- ctx.Err()
			return
		}
	}
	r := sse.NewReader(c.resp.Body, sse.Options{LastEventID: lastID})
	for {
		item, err := r.Next()
		if err != nil {
			c.ended <- err
			return
		}
		select {
		case c.items <- item:
		case <-ctx.Done():
			c.ended <- ctx.Err()
			return
		}
	}
}

// drop disconnects, as a browser tab put to sleep or a network change
// would, and waits for the reader to stop.
func (es *eventSource) drop() {
	c := es.conn
	if c == nil {
		return
	}
	es.conn = nil
	c.cancel()
	_ = c.resp.Body.Close()
	<-c.done
}

// nextItem returns the next thing the stream carries, updating the last
// event id as an EventSource does; the stream must not end.
func (es *eventSource) nextItem(t *testing.T) sse.Item {
	t.Helper()
	return es.nextItemBy(t, time.Now().Add(testTimeout))
}

// nextItemBy is nextItem for a caller that waits for several items within
// one bound.
func (es *eventSource) nextItemBy(t *testing.T, deadline time.Time) sse.Item {
	t.Helper()
	if es.conn == nil {
		t.Fatal("event source not connected")
	}
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	select {
	case item := <-es.conn.items:
		switch item.Kind {
		case sse.KindEvent:
			es.lastID = item.Event.ID
		case sse.KindID:
			es.lastID = item.LastEventID
		case sse.KindComment:
			es.comments++
		}
		return item
	case err := <-es.conn.ended:
		es.conn.ended <- err
		t.Fatalf("the event stream ended (an EventSource would fire an error and reconnect): %v", err)
	case <-timeout.C:
		t.Fatalf("no event within %v", testTimeout)
	}
	return sse.Item{}
}

// next returns the next event, skipping comments and id-only blocks, within
// testTimeout. The bound is one for the whole wait: tether writes a
// keep-alive comment every SSEOptions.KeepAlive (the ping interval, 100ms
// here), so a bound per item would never be reached on a stream that
// carries nothing else, and a lost event would hang the test instead of
// failing it.
func (es *eventSource) next(t *testing.T) sse.Event {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		if item := es.nextItemBy(t, deadline); item.Kind == sse.KindEvent {
			return item.Event
		}
	}
}

// expectOpen fails if the stream has ended so far.
func (es *eventSource) expectOpen(t *testing.T) {
	t.Helper()
	select {
	case err := <-es.conn.ended:
		es.conn.ended <- err
		t.Fatalf("the event stream ended: %v", err)
	default:
	}
}

// expectEnd waits for the stream to end cleanly (the response complete,
// not cut), after the events still to read, which it returns.
func (es *eventSource) expectEnd(t *testing.T) []sse.Event {
	t.Helper()
	var events []sse.Event
	deadline := time.After(testTimeout)
	for {
		select {
		case item := <-es.conn.items:
			if item.Kind == sse.KindEvent {
				events = append(events, item.Event)
			}
		case err := <-es.conn.ended:
			for len(es.conn.items) > 0 {
				if item := <-es.conn.items; item.Kind == sse.KindEvent {
					events = append(events, item.Event)
				}
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the event stream ended with %v, want a clean end", err)
			}
			return events
		case <-deadline:
			t.Fatalf("the event stream did not end within %v", testTimeout)
		}
	}
}

// ---- ids and notices ----

// splitID splits an event id "<token>-<n>".
func splitID(t *testing.T, id string) (string, uint64) {
	t.Helper()
	token, num, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(num, 10, 64)
	if !ok || err != nil || len(token) < 26 {
		t.Fatalf("event id %q is not <token>-<n>", id)
	}
	return token, n
}

// gapNotice is the data of a tether-gap event.
type gapNotice struct {
	Reason string `json:"reason"`
	Lost   uint64 `json:"lost"`
}

// expectGap reads the next event and fails unless it is a tether-gap
// notice with reason; it returns the notice and its id.
func (es *eventSource) expectGap(t *testing.T, reason string) (gapNotice, string) {
	t.Helper()
	ev := es.next(t)
	var g gapNotice
	if ev.Type != "tether-gap" || json.Unmarshal([]byte(ev.Data), &g) != nil || g.Reason != reason {
		t.Fatalf("got event %q %q, want a tether-gap with reason %q", ev.Type, ev.Data, reason)
	}
	return g, ev.ID
}

// ---- a numbered upstream that resumes ----

// histFeed is a WebSocket upstream with one global stream of numbered
// events ({"t":"event","seq":N}), all kept. Every connection gets the live
// events from its start; {"t":"resume","after":N} makes it replay N+1 to
// the head first. Replays and live events go out under one mutex, so a
// connection gets them in that order. A publisher adds one event every
// `every`.
type histFeed struct {
	*upstreamEnv
	resumes chan int64

	mu     sync.Mutex
	events []string // events[i] is number i+1
	live   []*upstreamtest.Conn
	newest *upstreamtest.Conn

	stop chan struct{}
	done chan struct{}
}

func newHistFeed(t *testing.T, every time.Duration) *histFeed {
	t.Helper()
	f := &histFeed{resumes: make(chan int64, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	f.upstreamEnv = newUpstream(t, upstreamConfig{quiet: true,
		onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) { f.serve(c) }})
	go f.publish(every)
	t.Cleanup(func() {
		close(f.stop)
		<-f.done
	})
	return f
}

func histEvent(seq int) string { return `{"t":"event","seq":` + strconv.Itoa(seq) + `}` }

func (f *histFeed) serve(c *upstreamtest.Conn) {
	f.mu.Lock()
	f.live = append(f.live, c)
	f.newest = c
	f.mu.Unlock()
	defer f.forget(c)
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m struct {
			T     string `json:"t"`
			After int64  `json:"after"`
		}
		if json.Unmarshal(data, &m) != nil || m.T != "resume" {
			continue
		}
		f.mu.Lock()
		for seq := int(m.After) + 1; seq <= len(f.events); seq++ {
			_ = c.Send(f.events[seq-1])
		}
		f.mu.Unlock()
		f.resumes <- m.After
	}
}

func (f *histFeed) forget(c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range f.live {
		if l == c {
			f.live = append(f.live[:i], f.live[i+1:]...)
			break
		}
	}
}

func (f *histFeed) publish(every time.Duration) {
	defer close(f.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.mu.Lock()
			ev := histEvent(len(f.events) + 1)
			f.events = append(f.events, ev)
			for _, c := range f.live {
				_ = c.Send(ev) // a dead connection loses it: the resume brings it back
			}
			f.mu.Unlock()
		}
	}
}

// head is the number of the last event published.
func (f *histFeed) head() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// takeNewest removes the newest live connection, for a fault.
func (f *histFeed) takeNewest(t *testing.T) *upstreamtest.Conn {
	t.Helper()
	f.mu.Lock()
	c := f.newest
	f.mu.Unlock()
	if c == nil {
		t.Fatal("no upstream connection to break")
	}
	f.forget(c)
	return c
}

// histRules sequences the feed and resumes it after each reconnect.
func histRules(t *testing.T) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Sequences = proxy.Sequences{ResumeMessage: mustResume(t, `{"t":"resume","after":{{.LastSeq}}}`), GapTimeout: 2 * time.Second}
	}
}

// histView checks what an EventSource reads of the feed: events numbered
// consecutively (from wherever the first connection joined), no
// duplicate, each with its number as id: with sequencing, an sse:// event
// is named by its stream (the unnamed one here) and number.
type histView struct {
	last int64
}

func (v *histView) take(t *testing.T, es *eventSource) {
	t.Helper()
	ev := es.next(t)
	var m struct {
		T   string `json:"t"`
		Seq int64  `json:"seq"`
	}
	if ev.Type != "message" || json.Unmarshal([]byte(ev.Data), &m) != nil || m.T != "event" {
		t.Fatalf("got event %q %q, want a feed event", ev.Type, ev.Data)
	}
	if v.last != 0 && m.Seq != v.last+1 {
		t.Fatalf("got event %d after %d: gap or duplicate", m.Seq, v.last)
	}
	if want := strconv.FormatInt(m.Seq, 10); ev.ID != want {
		t.Fatalf("event %d has id %q, want %q: its number", m.Seq, ev.ID, want)
	}
	v.last = m.Seq
}

// until reads until event seq n.
func (v *histView) until(t *testing.T, es *eventSource, n int64) {
	t.Helper()
	for v.last < n {
		v.take(t, es)
	}
}
