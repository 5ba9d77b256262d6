package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
)

// The SSE feed's behaviour.
const (
	// sseRetry is the "retry" field the feed opens every stream with, as
	// many servers do: tether takes it as a floor under its backoff.
	sseRetry = time.Second
	// sseHistorySeconds is how much history the feed keeps for resumes,
	// in seconds of events: well beyond the longest outage the faults
	// cause (an overload's two refusals, each followed by a Retry-After
	// plus up to the backoff cap of jitter), so every resume is a replay.
	sseHistorySeconds = 60
	// sseFeedHeartbeat is the idle time after which the feed writes a
	// ": keep-alive" comment, as servers do to keep proxies from closing
	// a quiet stream. It is half tether's idle limit (ping interval +
	// timeout), so even a slow -rate never looks dead to tether.
	sseFeedHeartbeat = 500 * time.Millisecond
	// ssePath is the feed's stream path; any path serves the same stream.
	ssePath = "/prices"
	// overloadRetryAfter is the Retry-After, in seconds, of an overloaded
	// feed's 503s: longer than its retry field, so the narration shows
	// tether honouring the larger of the two.
	overloadRetryAfter = 2
	// sseHiccupRepeat is how many of its latest events a hiccup sends again.
	sseHiccupRepeat = 2
)

// sseFeedStats is how the feed answered tether's requests.
type sseFeedStats struct {
	requests int   // requests tether made
	fresh    int   // answered with a stream from now on (no usable Last-Event-ID)
	resumed  int   // answered with a stream resumed after their Last-Event-ID
	refused  int   // answered with a 503
	replayed int64 // events replayed to resumed streams
	lost     int64 // events a resume asked for that the history no longer held
	// unstreamed counts events published while the feed was not healthy
	// (waitHealthy): those a resume or nothing made up for.
	unstreamed int64
}

// sseRequest is one request, as the feed answered it.
type sseRequest struct {
	n        int // arrival order, from 1
	time     time.Time
	lastID   string // the Last-Event-ID header, "" if absent
	foreign  bool   // lastID is not one of the feed's ids
	status   int
	replayed int64
	gapFrom  int64 // events asked for but no longer kept, inclusive; 0 when none
	gapTo    int64
}

// sseFeed is the SSE demo's upstream: a price feed on net/http. It numbers
// its events from 1 (the id of each is its number, and the JSON data carries
// it as seq), opens every stream with "retry: 1000", keeps
// sseHistorySeconds of events and answers a request carrying a numeric
// Last-Event-ID with the events after it before the live ones. Numbering
// starts with tether's first stream, so the app's stream begins at 1. It
// narrates each request as it answers it.
//
// Goroutines: the publisher, and the HTTP server's, one handler per
// request; each handler alone writes its response. All methods are safe for
// concurrent use.
type sseFeed struct {
	srv    *httpServer
	now    func() time.Time
	narr   *narrator // nil narrates nothing
	cancel context.CancelFunc
	wg     sync.WaitGroup // the publisher and the handlers
	once   sync.Once

	mu         sync.Mutex
	prices     prices
	streams    map[*sseStream]struct{} // responses being served
	closed     bool
	requests   int // requests seen
	brokeAt    int // requests seen when the last fault broke the stream
	refuseNext int // overload: answer this many requests with 503
	stats      sseFeedStats
	changed    chan struct{} // closed and replaced when a request comes or a stream leaves
}

// sseStream is one response being served; its fields are guarded by
// sseFeed.mu.
type sseStream struct {
	n       int      // the request's number
	conn    net.Conn // for the faults that act below HTTP
	next    int64    // the next event to write
	extra   []byte   // a hiccup's repeats, written after the events due
	stalled bool     // write nothing more, keep the connection
	ended   bool
	wake    chan struct{} // capacity 1: something is due
	quit    chan struct{} // closed when the response must end
}

type connKey struct{}

// startSSEFeed listens on 127.0.0.1:0 and starts the publisher.
func startSSEFeed(opts feedOptions) (*sseFeed, error) {
	if opts.keep <= 0 {
		opts.keep = sseHistorySeconds * opts.rate
	}
	f := &sseFeed{now: opts.now, narr: opts.narr, prices: newPrices(opts.rate, opts.keep, opts.rng),
		streams: make(map[*sseStream]struct{}), changed: make(chan struct{})}
	var err error
	f.srv, err = startHTTP(&http.Server{
		Handler: http.HandlerFunc(f.serve),
		// The faults need the TCP connection to drop or reset it mid-stream.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start feed: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(1)
	go func() { defer f.wg.Done(); publishEvery(ctx, opts.rate, f.tick) }()
	return f, nil
}

// URL is the feed's http:// stream address.
func (f *sseFeed) URL() string { return f.srv.url(ssePath) }

// Close stops the publisher, ends every stream and stops the server; it
// waits for all their goroutines and is idempotent.
func (f *sseFeed) Close() {
	f.once.Do(func() {
		f.cancel()
		f.mu.Lock()
		f.closed = true
		for st := range f.streams {
			f.endLocked(st, faultDrop)
		}
		f.mu.Unlock()
		f.srv.close()
		f.wg.Wait()
	})
}

// Stats tallies the requests tether made so far.
func (f *sseFeed) Stats() sseFeedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *sseFeed) published() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prices.head
}

func (f *sseFeed) unstreamed() int64 { return f.Stats().unstreamed }

func (f *sseFeed) summary() string { return sseFeedLine(f.published(), f.Stats()) }

// sseFeedLine says how the feed answered tether's requests.
func sseFeedLine(published int64, st sseFeedStats) string {
	s := fmt.Sprintf("published %s; %s from tether: %d new, %d resumed with Last-Event-ID (%s replayed), %d refused with 503",
		plural(published, "event", "events"), plural(int64(st.requests), "request", "requests"),
		st.fresh, st.resumed, plural(st.replayed, "event", "events"), st.refused)
	if st.lost > 0 {
		s += fmt.Sprintf("; %s no longer kept when asked for", plural(st.lost, "event", "events"))
	}
	return s
}

// waitHealthy waits until exactly one stream is open and it answers a
// request made after the last fault that broke one: a stalled stream
// tether has not given up yet does not count as healthy.
func (f *sseFeed) waitHealthy(ctx context.Context) bool {
	for {
		f.mu.Lock()
		ok := f.healthyLocked()
		changed := f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// healthyLocked reports whether exactly one stream is open and it answers
// a request made after the last fault that broke one. f.mu is held.
func (f *sseFeed) healthyLocked() bool {
	if len(f.streams) != 1 {
		return false
	}
	for st := range f.streams {
		return st.n > f.brokeAt && !st.ended
	}
	return false
}

// notifyLocked wakes waitHealthy.
func (f *sseFeed) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// serve answers one request: a refusal, or a stream until it must end.
func (f *sseFeed) serve(w http.ResponseWriter, r *http.Request) {
	st, rec, ok := f.admit(r)
	if !ok {
		http.Error(w, "the feed is closing", http.StatusServiceUnavailable)
		return
	}
	defer f.wg.Done()
	if f.narr != nil {
		f.narr.sayAt(rec.time, srcFeed, requestLine(rec))
	}
	if st == nil {
		w.Header().Set("Retry-After", strconv.Itoa(overloadRetryAfter))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(rec.status)
		_, _ = io.WriteString(w, "overloaded, try again later\n")
		return
	}
	defer f.leave(st)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	retry, _ := sse.AppendRetry(nil, sseRetry)
	rc := http.NewResponseController(w)
	if _, err := w.Write(retry); err != nil || rc.Flush() != nil {
		return
	}
	f.pump(r.Context(), w, rc, st)
}

// admit records a request and decides its answer: a stream, registered
// with its replay due, or (st nil) a refusal. ok is false after Close.
func (f *sseFeed) admit(r *http.Request) (st *sseStream, rec sseRequest, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, rec, false
	}
	f.wg.Add(1)
	f.requests++
	f.stats.requests++
	f.notifyLocked()
	rec = sseRequest{n: f.requests, time: f.now(), lastID: r.Header.Get("Last-Event-ID"), status: http.StatusOK}
	if f.refuseNext > 0 {
		f.refuseNext--
		f.stats.refused++
		rec.status = http.StatusServiceUnavailable
		return nil, rec, true
	}
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	f.prices.start(rec.time)
	st = &sseStream{n: rec.n, conn: conn, next: f.prices.head + 1, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	f.resumeLocked(st, &rec)
	f.streams[st] = struct{}{}
	return st, rec, true
}

// resumeLocked starts st after the request's Last-Event-ID, when it has
// one of the feed's ids, from the oldest kept event when the history no
// longer reaches back that far.
func (f *sseFeed) resumeLocked(st *sseStream, rec *sseRequest) {
	after, err := strconv.ParseInt(rec.lastID, 10, 64)
	rec.foreign = rec.lastID != "" && (err != nil || after < 0)
	if rec.lastID == "" || rec.foreign {
		f.stats.fresh++
		return
	}
	f.stats.resumed++
	if after >= f.prices.head {
		return
	}
	st.next = after + 1
	if oldest := f.prices.oldest(); st.next < oldest {
		rec.gapFrom, rec.gapTo = st.next, oldest-1
		f.stats.lost += oldest - st.next
		st.next = oldest
	}
	rec.replayed = f.prices.head - st.next + 1
	f.stats.replayed += rec.replayed
}

// leave forgets a stream whose handler is done.
func (f *sseFeed) leave(st *sseStream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endLocked(st, faultEnd)
	delete(f.streams, st)
	f.notifyLocked()
}

// pump writes what is due on st, flushing after every batch, until the
// response must end. A stream that has written nothing for
// sseFeedHeartbeat gets a keep-alive comment.
func (f *sseFeed) pump(ctx context.Context, w io.Writer, rc *http.ResponseController, st *sseStream) {
	beat := time.NewTimer(sseFeedHeartbeat)
	defer beat.Stop()
	idle := false
	for {
		if b := f.take(st, idle); len(b) > 0 {
			if _, err := w.Write(b); err != nil || rc.Flush() != nil {
				return
			}
			beat.Reset(sseFeedHeartbeat)
		}
		idle = false
		select {
		case <-st.wake:
		case <-beat.C:
			idle = true
		case <-st.quit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// take returns the events due on st and a hiccup's repeats after them, or
// a keep-alive comment when idle and nothing is due; nothing once st is
// stalled.
func (f *sseFeed) take(st *sseStream, idle bool) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st.stalled {
		return nil
	}
	var b []byte
	first := max(st.next, f.prices.oldest())
	for i, ev := range f.prices.events(first, f.prices.head) {
		// An event's id is its number, which its data carries as seq.
		b, _ = sse.AppendEvent(b, sse.Event{ID: strconv.FormatInt(first+int64(i), 10), Data: ev}, true)
	}
	st.next = f.prices.head + 1
	b, st.extra = append(b, st.extra...), nil
	if len(b) == 0 && idle {
		b = sse.AppendComment(b, "keep-alive")
	}
	return b
}

// tick publishes the events due by now and wakes the streams.
func (f *sseFeed) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	from, to := f.prices.publish(f.now())
	if from > to {
		return
	}
	if !f.healthyLocked() {
		f.stats.unstreamed += to - from + 1
	}
	for st := range f.streams {
		wakeStream(st)
	}
}

func wakeStream(st *sseStream) {
	select {
	case st.wake <- struct{}{}:
	default: // already woken
	}
}

// endLocked ends a response, once: cleanly (faultEnd: the handler returns
// and the body ends with its final chunk), or by closing its connection
// mid-response (faultDrop: FIN, faultReset: RST).
func (f *sseFeed) endLocked(st *sseStream, how faultKind) {
	if st.ended {
		return
	}
	st.ended = true
	close(st.quit)
	if st.conn == nil || how == faultEnd {
		return
	}
	if tcp, ok := st.conn.(*net.TCPConn); ok && how == faultReset {
		_ = tcp.SetLinger(0) // Close sends RST instead of FIN
	}
	_ = st.conn.Close()
}

// inject applies one of the feed's faults to every open stream (a stall
// and a hiccup to those not already stalled) and reports whether there was
// one. An overload ends the streams cleanly and refuses the next requests
// with 503 and Retry-After: tether waits at least the feed's retry before
// it asks again, so the refusals cannot be queued too late.
func (f *sseFeed) inject(k faultKind) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var repeats []byte
	if k == faultHiccup {
		if repeats = f.repeatsLocked(); len(repeats) == 0 {
			return false
		}
	}
	n := 0
	for st := range f.streams {
		if st.ended || st.stalled && (k == faultStall || k == faultHiccup) {
			continue
		}
		n++
		switch k {
		case faultReset, faultDrop, faultEnd:
			f.endLocked(st, k)
		case faultOverload:
			f.endLocked(st, faultEnd)
		case faultStall:
			st.stalled = true
		case faultHiccup:
			st.extra = append(st.extra, repeats...)
			wakeStream(st)
		default:
			panic(fmt.Sprintf("demo: the SSE feed has no fault of kind %d", k))
		}
	}
	if n == 0 {
		return false
	}
	if k == faultOverload {
		f.refuseNext = overloadRefusals
	}
	if k != faultHiccup {
		// A hiccup leaves the stream up: the next fault needs no new one.
		f.brokeAt = f.requests
	}
	return true
}

// repeatsLocked is a hiccup: the latest events again, without their id
// lines (a glitch that re-delivers data, not a resume), so only their seq
// says they are repeats.
func (f *sseFeed) repeatsLocked() []byte {
	var b []byte
	for _, ev := range f.prices.events(f.prices.head-sseHiccupRepeat+1, f.prices.head) {
		b, _ = sse.AppendEvent(b, sse.Event{Data: ev}, false)
	}
	return b
}

// requestLine says how the feed answered one of tether's requests.
func requestLine(r sseRequest) string {
	switch {
	case r.status != http.StatusOK:
		return fmt.Sprintf("refused request #%d: HTTP %d, Retry-After: %d", r.n, r.status, overloadRetryAfter)
	case r.lastID == "":
		return fmt.Sprintf("request #%d, no Last-Event-ID: a new stream (retry: %d, then live events)",
			r.n, sseRetry.Milliseconds())
	case r.foreign:
		return fmt.Sprintf("request #%d with Last-Event-ID: %s, not one of the feed's ids: a new stream", r.n, r.lastID)
	}
	after, _ := strconv.ParseInt(r.lastID, 10, 64)
	line := fmt.Sprintf("request #%d with Last-Event-ID: %s: ", r.n, r.lastID)
	switch {
	case r.gapFrom > 0:
		return line + fmt.Sprintf("events %d–%d are no longer kept; replaying %s from %d", r.gapFrom, r.gapTo,
			plural(r.replayed, "event", "events"), r.gapTo+1)
	case r.replayed == 0:
		return line + "nothing was published since; live events follow"
	case r.replayed == 1:
		return line + fmt.Sprintf("replaying the 1 event it missed (%d), then live", after+1)
	}
	return line + fmt.Sprintf("replaying the %d events it missed (%d–%d), then live", r.replayed, after+1, after+r.replayed)
}
