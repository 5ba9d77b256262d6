package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
	"github.com/tetherproxy/tether/upstream"
)

// newSSEServer starts a scriptable SSE upstream, closed at cleanup (after the
// Clients started later, whose cleanups run first).
func newSSEServer(t *testing.T, opts ssetest.Options) *ssetest.Server {
	t.Helper()
	s := ssetest.NewServer(opts)
	t.Cleanup(s.Close)
	return s
}

// sseOptions is testOptions for an SSE upstream at url.
func sseOptions(t *testing.T, url string, h *handler) upstream.Options {
	t.Helper()
	opts := testOptions(t, url, h)
	opts.Kind = upstream.KindSSE
	return opts
}

// waitCtx bounds a wait on the SSE test server by waitLimit.
func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// waitStreams waits until the server has exactly n live streams.
func waitStreams(t *testing.T, srv *ssetest.Server, n int) {
	t.Helper()
	if err := srv.WaitStreams(waitCtx(t), n); err != nil {
		t.Fatalf("%d live streams not reached within %v (now %d)", n, waitLimit, srv.Streams())
	}
}

// waitRequests waits until the server has seen n requests and returns them.
func waitRequests(t *testing.T, srv *ssetest.Server, n int) []ssetest.Request {
	t.Helper()
	reqs, err := srv.WaitRequests(waitCtx(t), n)
	if err != nil {
		t.Fatalf("%d requests not reached within %v (now %d)", n, waitLimit, len(srv.Requests()))
	}
	return reqs
}

// nextData returns the data of the handler's next n messages, checking that
// each is a text message.
func nextData(t *testing.T, h *handler, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		m := h.nextMessage(t)
		if m.op != ws.OpText {
			t.Errorf("message %q has opcode %v, want text", m.data, m.op)
		}
		out = append(out, m.data)
	}
	return out
}

// TestSSEEventsBecomeMessages: every dispatched event is one text message,
// in either format; comments, id-only blocks and retry fields are not
// messages; multi-line data is joined with LF whatever the line ends; an
// event without an id line carries the stream's last event ID.
func TestSSEEventsBecomeMessages(t *testing.T) {
	dataJSON := `{"seq":4,"q":"\"x\"` + "\t" + `<&>","u":"é€😀"}`
	tests := []struct {
		format upstream.SSEFormat
		want   []string
	}{
		{upstream.SSEJSON, []string{
			`{"id":"1","event":"message","data":"plain"}`,
			`{"id":"2","event":"price","data":"line1\nline2\nline3"}`,
			`{"id":"2","event":"message","data":""}`,
			`{"id":"4","event":"message","data":"{\"seq\":4,\"q\":\"\\\"x\\\"\t<&>\",\"u\":\"é€😀\"}"}`,
			`{"id":"9","event":"message","data":"after an id-only block"}`,
		}},
		{upstream.SSEData, []string{
			"plain", "line1\nline2\nline3", "", dataJSON, "after an id-only block",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format.String(), func(t *testing.T) {
			srv := newSSEServer(t, ssetest.Options{LineEnd: "\r\n", Retry: time.Millisecond})
			h := newHandler()
			st := newStates()
			opts := sseOptions(t, srv.URL(), h)
			opts.SSEFormat = tt.format
			opts.Confirm = func(b []byte) bool { return strings.Contains(string(b), "line2") }
			opts.OnState = st.record
			startClient(t, opts)
			waitStreams(t, srv, 1)

			srv.Publish(ssetest.Event{Data: "plain"})
			srv.Comment("keep-alive\nsecond comment line")
			srv.Publish(ssetest.Event{Type: "price", Data: "line1\nline2\r\nline3"})
			srv.Publish(ssetest.Event{Data: "", OmitID: true})
			srv.Retry(5 * time.Millisecond)
			srv.Publish(ssetest.Event{Data: dataJSON})
			srv.Raw("id: 9\r\n\r\n")
			srv.Publish(ssetest.Event{Data: "after an id-only block", OmitID: true})

			got := nextData(t, h, len(tt.want))
			if !slices.Equal(got, tt.want) {
				t.Errorf("messages\n%q\nwant\n%q", got, tt.want)
			}
			if tt.format == upstream.SSEJSON {
				checkJSONShape(t, got)
			}
			st.waitFor(t, upstream.StateConfirmed)
			if m, ok := pending(h.messages); ok {
				t.Errorf("unexpected extra message %q", m.data)
			}
		})
	}
}

// checkJSONShape decodes each message as the documented object: exactly the
// three members, all strings.
func checkJSONShape(t *testing.T, msgs []string) {
	t.Helper()
	for _, m := range msgs {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			t.Errorf("message %q is not JSON: %v", m, err)
			continue
		}
		if len(obj) != 3 {
			t.Errorf("message %q has %d members, want id, event and data", m, len(obj))
		}
		for _, k := range []string{"id", "event", "data"} {
			if _, ok := obj[k].(string); !ok {
				t.Errorf("message %q: %s is %T, want a string", m, k, obj[k])
			}
		}
	}
}

// TestSSERequestHeaders: the request asks for an event stream as
// EventSource does, carries the static headers and the bearer token read
// from its file, and no Last-Event-ID before any event was seen.
func TestSSERequestHeaders(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	token := filepath.Join(t.TempDir(), "token")
	writeFile(t, token, "  s3cret\n")
	opts := sseOptions(t, srv.URL()+"/feed?x=1", newHandler())
	opts.TokenFile = token
	opts.Header = http.Header{"X-Tenant": {"acme"}}
	startClient(t, opts)

	r := waitRequests(t, srv, 1)[0]
	for name, want := range map[string]string{
		"Accept":        "text/event-stream",
		"Cache-Control": "no-cache",
		"X-Tenant":      "acme",
		"Authorization": "Bearer s3cret",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if _, ok := r.Header["Last-Event-Id"]; ok {
		t.Errorf("first request sent Last-Event-ID %q, want none", r.LastEventID)
	}
	if opts.Header.Get("Accept") != "" {
		t.Errorf("the Client changed the caller's Header: %v", opts.Header)
	}
}

// TestSSEResumeAcrossFaults: the stream is broken in every way a server or
// network breaks it; each new request resumes with Last-Event-ID set to the
// last event received, the server replays what was published meanwhile
// from its bounded history, and the handler sees every event exactly once,
// in order.
func TestSSEResumeAcrossFaults(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{History: 16, CommentEvery: 2})
	h := newHandler()
	opts := sseOptions(t, srv.URL(), h)
	opts.SSEFormat = upstream.SSEData
	startClient(t, opts)

	faults := []struct {
		name string
		do   func() int
	}{{"drop", srv.DropAll}, {"reset", srv.ResetAll}, {"clean end", srv.EndAll}, {"drop again", srv.DropAll}}
	var got []string
	published := 0
	publish := func(n int) {
		for range n {
			published++
			srv.Publish(ssetest.Event{Data: "e" + strconv.Itoa(published)})
		}
	}
	var resumeFrom []string // the Last-Event-ID each reconnect must send
	for _, f := range faults {
		waitStreams(t, srv, 1)
		publish(5)
		got = append(got, nextData(t, h, published-len(got))...)
		resumeFrom = append(resumeFrom, strconv.Itoa(published))
		if n := f.do(); n != 1 {
			t.Fatalf("%s: ended %d streams, want 1", f.name, n)
		}
		publish(3) // while the client reconnects: replayed or live
	}
	waitStreams(t, srv, 1)
	publish(2)
	got = append(got, nextData(t, h, published-len(got))...)

	want := make([]string, published)
	for i := range want {
		want[i] = "e" + strconv.Itoa(i+1)
	}
	if !slices.Equal(got, want) {
		t.Errorf("received\n%q\nwant each of e1…e%d once, in order", got, published)
	}
	reqs := srv.Requests()
	if len(reqs) != len(faults)+1 {
		t.Fatalf("%d requests, want %d", len(reqs), len(faults)+1)
	}
	for i, r := range reqs[1:] {
		if r.LastEventID != resumeFrom[i] || r.GapFrom != 0 || r.Status != http.StatusOK {
			t.Errorf("request %d after %s: Last-Event-ID %q, gap %d-%d, status %d; want %q, no gap, 200",
				r.N, faults[i].name, r.LastEventID, r.GapFrom, r.GapTo, r.Status, resumeFrom[i])
		}
	}
}

// TestSSEResumeWithoutIDs: after a stream whose events carried no id, the
// next request sends no Last-Event-ID; after one that set an id and then
// sent events without, it sends that id (the ID persists, as in a browser).
func TestSSEResumeWithoutIDs(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	h := newHandler()
	startClient(t, sseOptions(t, srv.URL(), h))

	waitStreams(t, srv, 1)
	srv.Publish(ssetest.Event{Data: "a", OmitID: true})
	nextData(t, h, 1)
	srv.DropAll()
	waitStreams(t, srv, 1)
	srv.Raw("id: abc\ndata: b\n\ndata: c\n\n")
	nextData(t, h, 2)
	srv.DropAll()
	waitStreams(t, srv, 1)

	reqs := waitRequests(t, srv, 3)
	if _, ok := reqs[1].Header["Last-Event-Id"]; ok {
		t.Errorf("request 2 sent Last-Event-ID %q after events without ids, want none", reqs[1].LastEventID)
	}
	if reqs[2].LastEventID != "abc" {
		t.Errorf("request 3 sent Last-Event-ID %q, want the persisting id \"abc\"", reqs[2].LastEventID)
	}
}

// TestSSEStallDetected: the server stops writing while keeping the socket
// open. SSE has no ping, so silence itself is the signal: the stream is
// declared dead within PingInterval + PingTimeout of its last byte, and the
// Client resumes on a new request.
func TestSSEStallDetected(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	h := newHandler()
	opts := sseOptions(t, srv.URL(), h)
	opts.PingInterval, opts.PingTimeout = pingInterval, pingTimeout
	startClient(t, opts)

	waitStreams(t, srv, 1)
	before := time.Now()
	srv.Publish(ssetest.Event{Data: "last"})
	last := h.nextMessage(t)
	if n := srv.StallAll(); n != 1 {
		t.Fatalf("stalled %d streams, want 1", n)
	}
	lost := h.nextLost(t)
	if !errors.Is(lost.err, upstream.ErrHeartbeatTimeout) {
		t.Fatalf("Lost(%v), want ErrHeartbeatTimeout", lost.err)
	}
	bound := pingInterval + pingTimeout
	t.Logf("stall detected %v after the last event (bound %v)", lost.at.Sub(last.at), bound)
	if lost.at.Sub(before) < bound || lost.at.Sub(last.at) > bound+slack {
		t.Errorf("detected %v after the last event, want in [%v, %v]", lost.at.Sub(last.at), bound, bound+slack)
	}
	if r := waitRequests(t, srv, 2)[1]; r.LastEventID != "1" {
		t.Errorf("resumed with Last-Event-ID %q, want \"1\"", r.LastEventID)
	}
}

// TestSSECommentsKeepAlive: a stream with no events but regular comments
// (the usual SSE keep-alive) is never declared dead. The heartbeat runs on
// 500 ms, not the package's 100 ms: the server shares the CPU with tether,
// and at load its goroutine went more than 100 ms without writing a
// comment while tether's heartbeat woke on time, which to tether is a
// silent stream.
func TestSSECommentsKeepAlive(t *testing.T) {
	const interval, timeout = 500 * time.Millisecond, 500 * time.Millisecond
	srv := newSSEServer(t, ssetest.Options{Heartbeat: interval / 3})
	h := newHandler()
	opts := sseOptions(t, srv.URL(), h)
	opts.PingInterval, opts.PingTimeout = interval, timeout
	startClient(t, opts)

	waitStreams(t, srv, 1)
	quiet := 4 * (interval + timeout)
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	select {
	case lost := <-h.losts:
		t.Fatalf("stream with comments every %v lost within %v: %v", interval/3, quiet, lost.err)
	case <-timer.C:
	}
	if m, ok := pending(h.messages); ok {
		t.Errorf("a comment became message %q", m.data)
	}
}

// TestSSERetryIsAFloor: a "retry" field does not set the delay, it bounds it
// from below: with JitterNone the delay is exactly the floor (the backoff
// alone would wait 20ms); a later retry value replaces it; a huge one is
// capped like Retry-After.
func TestSSERetryIsAFloor(t *testing.T) {
	const floor = 300 * time.Millisecond
	srv := newSSEServer(t, ssetest.Options{Retry: floor})
	h := newHandler()
	opts := sseOptions(t, srv.URL(), h)
	delays := scheduledChan(t, &opts)
	startClient(t, opts)

	waitStreams(t, srv, 1)
	srv.Publish(ssetest.Event{Data: "after retry"}) // the retry field precedes it
	nextData(t, h, 1)
	dropped := time.Now()
	srv.DropAll()
	r := waitRequests(t, srv, 2)[1]
	if gap := r.Time.Sub(dropped); gap < floor {
		t.Errorf("reconnected %v after the drop, want ≥ retry %v", gap, floor)
	}

	waitStreams(t, srv, 1)
	srv.Retry(2 * time.Hour)
	srv.Publish(ssetest.Event{Data: "after a huge retry"})
	nextData(t, h, 1)
	srv.DropAll()
	for i, want := range []time.Duration{floor, upstream.MaxRetryAfter} {
		if got := recv(t, delays, "scheduled delay"); got != want {
			t.Errorf("delay %d = %v, want %v", i+1, got, want)
		}
	}
}

// scheduledChan makes opts log to the test output and sends the delay of
// each backoff wait on the returned channel as it is logged.
func scheduledChan(t *testing.T, opts *upstream.Options) <-chan time.Duration {
	ch := make(chan time.Duration, 64)
	test := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel)).Core()
	opts.Logger = zap.New(zapcore.NewTee(test, &delayCore{ch: ch}))
	return ch
}

// delayCore is a zapcore.Core that only looks at the Client's "reconnect
// scheduled" entries, for their delay field.
type delayCore struct{ ch chan<- time.Duration }

func (d *delayCore) Enabled(zapcore.Level) bool        { return true }
func (d *delayCore) With([]zapcore.Field) zapcore.Core { return d }
func (d *delayCore) Sync() error                       { return nil }

func (d *delayCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == scheduled {
		return ce.AddCore(e, d)
	}
	return ce
}

func (d *delayCore) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Key == "delay" {
			d.ch <- time.Duration(f.Integer)
		}
	}
	return nil
}

// TestSSEFleetSpreadOverFloor: many clients lose their streams at once, all
// told "retry: 300" by the server. Browsers would all come back exactly
// 300ms later; tether's clients respect the floor and spread over
// [floor, floor+Cap) with full jitter.
//
// The spread is judged on the delays the clients scheduled, which is what
// tether decides. The server's arrival times are held to those delays: the
// k-th arrival comes no sooner than the k-th shortest delay (no client beats
// its own timer) and within slack of it. Arrivals are not counted per slot:
// on a loaded machine a pause of the test process lets several timers fire
// together, which bunches arrivals that were scheduled apart.
func TestSSEFleetSpreadOverFloor(t *testing.T) {
	const (
		clients = 50
		floor   = 300 * time.Millisecond
		capD    = 600 * time.Millisecond
		bucket  = capD / 10
	)
	srv := newSSEServer(t, ssetest.Options{Retry: floor})
	h := newHandler()
	core, logs := observer.New(zapcore.InfoLevel)
	for i := range clients {
		opts := sseOptions(t, srv.URL(), h)
		src := rand.New(rand.NewPCG(stormSeed, uint64(i)))
		opts.Backoff = upstream.Backoff{Jitter: upstream.JitterFull, Base: backoffBase, Cap: capD, Rand: src.Float64}
		opts.Logger = zap.New(core)
		startClient(t, opts)
	}
	waitStreams(t, srv, clients)
	srv.Publish(ssetest.Event{Data: "x"}) // every client has read the retry field once it has this
	nextData(t, h, clients)
	if d := scheduledDelays(logs); len(d) != 0 {
		t.Fatalf("delays %v scheduled before the drop, want none", d)
	}

	dropped := time.Now()
	if n := srv.DropAll(); n != clients {
		t.Fatalf("dropped %d streams, want %d", n, clients)
	}
	reqs := waitRequests(t, srv, 2*clients)[clients:]
	delays := scheduledDelays(logs) // each was logged before its client's request
	if len(delays) != clients {
		t.Fatalf("%d delays scheduled after the drop, want one per client (%d): %v", len(delays), clients, delays)
	}
	offsets := make([]time.Duration, len(reqs))
	for i, r := range reqs {
		offsets[i] = r.Time.Sub(dropped)
	}
	slices.Sort(offsets)
	slices.Sort(delays)
	t.Logf("delays from %v to %v, fullest slot %d; reconnects from %v to %v after the drop, fullest slot %d",
		delays[0], delays[len(delays)-1], maxPerSlot(delays, bucket), offsets[0], offsets[len(offsets)-1], maxPerSlot(offsets, bucket))
	if delays[0] < floor || delays[len(delays)-1] >= floor+capD {
		t.Errorf("delays from %v to %v, want within [floor, floor + Cap) = [%v, %v)", delays[0], delays[len(delays)-1], floor, floor+capD)
	}
	for k := range offsets {
		if offsets[k] < delays[k] || offsets[k] > delays[k]+slack {
			t.Errorf("reconnect %d came %v after the drop, want between its delay %v and that + slack", k, offsets[k], delays[k])
		}
	}
	if spread := delays[len(delays)-1] - delays[0]; spread < capD/2 {
		t.Errorf("delays spread over %v, want at least Cap/2 = %v", spread, capD/2)
	}
	if most := maxPerSlot(delays, bucket); most > clients*3/10 {
		t.Errorf("%d of %d clients scheduled within one %v slot, want ≤ %d", most, clients, bucket, clients*3/10)
	}
}

// maxPerSlot counts offsets per slot-wide interval and returns the fullest
// interval's count.
func maxPerSlot(offsets []time.Duration, slot time.Duration) int {
	counts := map[time.Duration]int{}
	most := 0
	for _, at := range offsets {
		counts[at/slot]++
		most = max(most, counts[at/slot])
	}
	return most
}

// TestSSERetryAfter: a 503 with Retry-After: 1 holds the next request back
// at least a second, through the same policy as a WebSocket handshake.
func TestSSERetryAfter(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	srv.RespondNext(1, ssetest.Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"1"}}})
	h := newHandler()
	opts := sseOptions(t, srv.URL(), h)
	logs := observe(t, &opts)
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	var se *upstream.StatusError
	if !errors.As(first.Err, &se) || se.Status != http.StatusServiceUnavailable || se.RetryAfter != time.Second || first.Permanent {
		t.Fatalf("First() = %+v, want transient 503 with RetryAfter 1s", first)
	}
	if r := h.nextRestore(t); r.gen != 2 {
		t.Errorf("connected on gen %d, want 2", r.gen)
	}
	reqs := waitRequests(t, srv, 2)
	if gap := reqs[1].Time.Sub(reqs[0].Time); gap < time.Second {
		t.Errorf("next request %v after Retry-After: 1, want ≥ 1s", gap)
	}
	if got := scheduledDelays(logs); len(got) != 1 || got[0] != time.Second {
		t.Errorf("scheduled delays %v, want [1s]", got)
	}
}

// TestSSENoContentStops: HTTP 204 is the standard's "stop reconnecting":
// permanent on the first request (the app's handshake is refused) and
// after a stream alike, with a reason an operator recognises.
func TestSSENoContentStops(t *testing.T) {
	const reason = "upstream asked to stop (HTTP 204)"
	t.Run("first request", func(t *testing.T) {
		srv := newSSEServer(t, ssetest.Options{})
		srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
		c := startClient(t, sseOptions(t, srv.URL(), newHandler()))

		first := recv(t, c.First(), "first dial result")
		if first.Err == nil || !first.Permanent || first.Err.Error() != reason {
			t.Fatalf("First() = %+v, want permanent %q", first, reason)
		}
		waitClosed(t, c.Done(), "Client stop")
		checkStopped(t, c.Err(), reason)
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("after a stream", func(t *testing.T) {
		srv := newSSEServer(t, ssetest.Options{})
		h := newHandler()
		c := startClient(t, sseOptions(t, srv.URL(), h))
		waitStreams(t, srv, 1)
		srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
		srv.DropAll()
		waitClosed(t, c.Done(), "Client stop")
		checkStopped(t, c.Err(), reason)
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

// checkStopped asserts a Client's permanent stop error.
func checkStopped(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, upstream.ErrPermanent) || err == nil || !strings.Contains(err.Error(), reason) {
		t.Errorf("Err() = %v, want ErrPermanent saying %q", err, reason)
	}
}

// TestSSEWrongContentType: a 200 whose body is not an event stream (a login
// page, a JSON error) is permanent and names what came; the media type is
// compared without case and parameters.
func TestSSEWrongContentType(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	srv.RespondNext(1, ssetest.Response{Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: "<html>"})
	c := startClient(t, sseOptions(t, srv.URL(), newHandler()))

	first := recv(t, c.First(), "first dial result")
	if first.Err == nil || !first.Permanent {
		t.Fatalf("First() = %+v, want permanent", first)
	}
	waitClosed(t, c.Done(), "Client stop")
	checkStopped(t, c.Err(), `HTTP 200 with Content-Type "text/html; charset=utf-8", not text/event-stream`)

	t.Run("case and parameters", func(t *testing.T) {
		srv := newSSEServer(t, ssetest.Options{})
		srv.RespondNext(1, ssetest.Response{
			Header: http.Header{"Content-Type": {"Text/Event-Stream ; charset=UTF-8"}},
			Body:   "data: x\n\n",
			Stall:  true,
		})
		h := newHandler()
		startClient(t, sseOptions(t, srv.URL(), h))
		if got := nextData(t, h, 1); got[0] != `{"id":"","event":"message","data":"x"}` {
			t.Errorf("message %q", got[0])
		}
	})
}

// TestSSEAuth: a 401 re-reads the token file on the next request, so a
// rotated token heals it; a server refusing every token stops the Client
// after AuthFailuresMax requests with the reason the app will see.
func TestSSEAuth(t *testing.T) {
	t.Run("rotated token", func(t *testing.T) {
		srv := newSSEServer(t, ssetest.Options{})
		srv.RespondNext(1, ssetest.Response{Status: http.StatusUnauthorized})
		token := filepath.Join(t.TempDir(), "token")
		writeFile(t, token, "old")
		h := newHandler()
		opts := sseOptions(t, srv.URL(), h)
		opts.TokenFile = token
		opts.OnState = func(s upstream.State) {
			if s == upstream.StateWaiting {
				// The kubelet rotates the token during the backoff wait.
				_ = os.WriteFile(token, []byte("new\n"), 0o600)
			}
		}
		startClient(t, opts)

		if r := h.nextRestore(t); r.gen != 2 {
			t.Errorf("connected on gen %d, want 2", r.gen)
		}
		reqs := waitRequests(t, srv, 2)
		for i, want := range []string{"Bearer old", "Bearer new"} {
			if got := reqs[i].Header.Get("Authorization"); got != want {
				t.Errorf("request %d Authorization %q, want %q", i+1, got, want)
			}
		}
	})
	t.Run("always refused", func(t *testing.T) {
		srv := newSSEServer(t, ssetest.Options{})
		srv.RespondNext(10, ssetest.Response{Status: http.StatusForbidden})
		opts := sseOptions(t, srv.URL(), newHandler())
		opts.AuthFailuresMax = 3
		c := startClient(t, opts)
		waitClosed(t, c.Done(), "Client stop")
		if err := c.Err(); !errors.Is(err, upstream.ErrAuthFailed) || !strings.Contains(err.Error(), "(HTTP 403)") {
			t.Errorf("Err() = %v, want ErrAuthFailed (HTTP 403)", err)
		}
		if n := len(srv.Requests()); n != opts.AuthFailuresMax {
			t.Errorf("%d requests, want %d", n, opts.AuthFailuresMax)
		}
	})
}

// TestSSEOversizedEvent: an event whose data, or one of whose lines, is
// over MaxMessageBytes ends the stream with a 1009 close naming the limit,
// which the default policy makes permanent, as for a WebSocket message.
func TestSSEOversizedEvent(t *testing.T) {
	const limit = 1024
	tests := []struct{ name, data string }{
		{"one line", strings.Repeat("x", limit+1)},
		{"many lines", strings.Repeat(strings.Repeat("y", 100)+"\n", 11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newSSEServer(t, ssetest.Options{})
			h := newHandler()
			opts := sseOptions(t, srv.URL(), h)
			opts.SSEFormat = upstream.SSEData
			opts.MaxMessageBytes = limit
			c := startClient(t, opts)
			waitStreams(t, srv, 1)

			// Its line, "data: " included, is exactly the limit.
			fits := strings.Repeat("z", limit-len("data: "))
			srv.Publish(ssetest.Event{Data: fits})
			srv.Publish(ssetest.Event{Data: tt.data})
			if got := nextData(t, h, 1); got[0] != fits {
				t.Errorf("first message has %d bytes, want %d", len(got[0]), len(fits))
			}
			lost := h.nextLost(t)
			var ce *upstream.CloseError
			if !errors.As(lost.err, &ce) || ce.Code != 1009 || !strings.Contains(ce.Reason, "TETHER_MAX_MESSAGE_BYTES") {
				t.Fatalf("Lost(%v), want close 1009 naming TETHER_MAX_MESSAGE_BYTES", lost.err)
			}
			waitClosed(t, c.Done(), "Client stop")
			if err := c.Err(); !errors.As(err, &ce) || ce.Code != 1009 {
				t.Errorf("Err() = %v, want the 1009 close", err)
			}
		})
	}
}

// TestSSEReadOnly: an SSE connection refuses every message, and a
// heartbeat message cannot be configured for it.
func TestSSEReadOnly(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	h := newHandler()
	sent := make(chan [2]error, 1)
	h.restore = func(ctx context.Context, c *upstream.Conn) error {
		sent <- [2]error{c.SendText(ctx, []byte("hi")), c.Send(ctx, ws.OpBinary, []byte{1})}
		return nil
	}
	startClient(t, sseOptions(t, srv.URL(), h))
	for i, err := range recv(t, sent, "Restore's sends") {
		if !errors.Is(err, upstream.ErrReadOnly) {
			t.Errorf("send %d: %v, want ErrReadOnly", i+1, err)
		}
	}

	opts := sseOptions(t, srv.URL(), newHandler())
	opts.HeartbeatMessage = []byte("ping")
	if _, err := upstream.New(opts); err == nil {
		t.Error("New accepted a HeartbeatMessage for an SSE upstream")
	}
}

// TestSSEBadURL: a ws:// URL for an SSE upstream, like any URL that cannot
// be requested, is permanent; credentials in a URL never reach the logs,
// whatever fails.
func TestSSEBadURL(t *testing.T) {
	const secret = "hunter2"
	tests := []struct {
		url       string
		permanent bool
	}{
		{"ws://127.0.0.1:1/feed", true},
		{"http://u:" + secret + "@127.0.0.1:1/?token=" + secret, false}, // refused: nothing listens on port 1
		{"http:///feed?token=" + secret, true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			opts := sseOptions(t, tt.url, newHandler())
			opts.MaxAttempts = 1
			logs := observe(t, &opts)
			c := startClient(t, opts)
			first := recv(t, c.First(), "first dial result")
			if first.Err == nil || first.Permanent != tt.permanent {
				t.Fatalf("First() = %+v, want an error, permanent %v", first, tt.permanent)
			}
			waitClosed(t, c.Done(), "Client stop")
			for _, e := range logs.All() {
				if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, secret) {
					t.Errorf("log entry holds the URL's credentials: %s", line)
				}
			}
		})
	}
}

// TestSSEDialTimeout: a server that accepts TCP but never answers the
// request fails the dial after DialTimeout, as a transient timeout.
func TestSSEDialTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	url, _ := silent(t)
	opts := sseOptions(t, "http"+strings.TrimPrefix(url, "ws"), newHandler())
	opts.DialTimeout = timeout
	rec := newRecorder()
	opts.Observer = rec
	start := time.Now()
	c := startClient(t, opts)

	first := recv(t, c.First(), "first dial result")
	took := time.Since(start)
	if first.Err == nil || first.Permanent {
		t.Fatalf("First() = %+v, want a transient error", first)
	}
	if took < timeout || took > timeout+slack {
		t.Errorf("first dial failed after %v, want in [%v, %v]", took, timeout, timeout+slack)
	}
	rec.expect(t, "dialed timeout")
}

// TestSSEObserver: the Observer hears SSE dials and losses with the
// documented labels.
func TestSSEObserver(t *testing.T) {
	// Comments keep the streams alive until the test stalls them.
	srv := newSSEServer(t, ssetest.Options{Heartbeat: pingInterval / 3})
	rec := newRecorder()
	opts := sseOptions(t, srv.URL(), newHandler())
	opts.Observer = rec
	opts.PingInterval, opts.PingTimeout = pingInterval, pingTimeout
	startClient(t, opts)

	steps := []struct {
		fault func() int
		want  string
	}{
		{srv.EndAll, "lost eof 0"},
		{srv.DropAll, "lost eof 0"},
		{srv.ResetAll, "lost reset 0"},
		{srv.StallAll, "lost heartbeat 0"},
	}
	for _, s := range steps {
		rec.expect(t, "dialed ok")
		waitStreams(t, srv, 1)
		s.fault()
		rec.expect(t, s.want)
	}
	rec.expect(t, "dialed ok")
	srv.RespondNext(1, ssetest.Response{Status: http.StatusBadGateway})
	srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
	srv.EndAll()
	rec.expect(t, "lost eof 0", "dialed http_5xx", "dialed http_other")
}

// TestSSEProbe: a readiness probe of an SSE upstream succeeds on an event
// stream and ends it at once, and fails on a refusal.
func TestSSEProbe(t *testing.T) {
	srv := newSSEServer(t, ssetest.Options{})
	opts := sseOptions(t, srv.URL(), newHandler())
	if err := upstream.Probe(waitCtx(t), opts); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	waitStreams(t, srv, 0)
	if r := waitRequests(t, srv, 1)[0]; r.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("probe Accept %q", r.Header.Get("Accept"))
	}

	srv.RespondNext(1, ssetest.Response{Status: http.StatusNoContent})
	if err := upstream.Probe(waitCtx(t), opts); !errors.Is(err, upstream.ErrPermanent) {
		t.Errorf("Probe of a 204: %v, want ErrPermanent", err)
	}
	srv.RespondNext(1, ssetest.Response{Status: http.StatusServiceUnavailable})
	var se *upstream.StatusError
	if err := upstream.Probe(waitCtx(t), opts); !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Errorf("Probe of a 503: %v, want a StatusError", err)
	}
}

// TestParseKindAndFormat: the names round-trip and anything else is refused.
func TestParseKindAndFormat(t *testing.T) {
	for _, k := range []upstream.Kind{upstream.KindWebSocket, upstream.KindSSE} {
		var got upstream.Kind
		if err := got.UnmarshalText([]byte(" " + strings.ToUpper(k.String()) + " ")); err != nil || got != k {
			t.Errorf("UnmarshalText(%q) = %v, %v", k, got, err)
		}
	}
	for _, f := range []upstream.SSEFormat{upstream.SSEJSON, upstream.SSEData} {
		var got upstream.SSEFormat
		if err := got.UnmarshalText([]byte(f.String())); err != nil || got != f {
			t.Errorf("UnmarshalText(%q) = %v, %v", f, got, err)
		}
	}
	if got := (upstream.KindSSE).String(); got != "sse" {
		t.Errorf("KindSSE = %q", got)
	}
	if got := (upstream.SSEJSON).String(); got != "json" {
		t.Errorf("SSEJSON = %q", got)
	}
	for _, bad := range []string{"", "ws", "server-sent-events"} {
		if _, err := upstream.ParseKind(bad); err == nil {
			t.Errorf("ParseKind(%q) accepted", bad)
		}
		if _, err := upstream.ParseSSEFormat(bad); err == nil {
			t.Errorf("ParseSSEFormat(%q) accepted", bad)
		}
	}
	if _, err := upstream.New(upstream.Options{URL: "http://x/", Kind: 7, Handler: newHandler()}); err == nil {
		t.Error("New accepted Kind 7")
	}
}

// TestSSEFlushBeforeWait: a Handler with a Flush gets it once the events
// that arrived together are handed over, before the reader waits for more,
// and right before Lost.
func TestSSEFlushBeforeWait(t *testing.T) {
	const burst = 50
	srv := newSSEServer(t, ssetest.Options{})
	h := newFlushHandler()
	opts := sseOptions(t, srv.URL(), h.handler)
	opts.MaxAttempts = 1
	startFlushClient(t, opts, h)
	waitStreams(t, srv, 1)

	var b strings.Builder
	for i := range burst {
		fmt.Fprintf(&b, "id: %d\ndata: m%d\n\n", i, i)
	}
	srv.Raw(b.String()) // one write: the events arrive together
	for range burst {
		h.nextMessage(t)
	}
	waitFlushAfter(t, h, burst)
	flushes := 0
	for _, c := range h.calls() {
		if c == "flush 1" {
			flushes++
		}
	}
	t.Logf("%d flushes for %d events that arrived together", flushes, burst)
	srv.EndAll()
	h.nextLost(t)
	// Restore runs on its own goroutine and may be noted anywhere after the
	// connect; the order asked for is the reader's: Flush, then Lost.
	calls := slices.DeleteFunc(h.calls(), func(c string) bool { return c == "restore 1" })
	lost := slices.Index(calls, "lost 1")
	if lost < 1 || calls[lost-1] != "flush 1" {
		t.Errorf("calls end %q, want a flush right before Lost", calls[max(0, lost-3):])
	}
}
