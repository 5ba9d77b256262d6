package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
)

const (
	// browserRetry is an EventSource's reconnection time until its stream
	// sends a "retry" field (Chromium's default).
	browserRetry = 3 * time.Second
	// appMaxEvent bounds one event the app reads: the feed's are tiny.
	appMaxEvent = 1 << 20
	// appErrorBody bounds how much of a refusal's body the app quotes.
	appErrorBody = 200
	// appMinPause is the shortest silence between two events after which
	// the app remarks that they flow again: shorter than any outage the
	// faults cause (the feed's retry alone is 1s), longer than the gap
	// between two events at any rate but the slowest.
	appMinPause = 800 * time.Millisecond
)

// appStats is what the SSE demo's app saw.
type appStats struct {
	events, gaps, missed, duplicates, late int64
	notices, announced                     int64 // tether's gap notices (TETHER_GAP_POLICY=notify) and the events they gave up
	tetherGaps                             int64 // tether-gap events: tether could not resume the app's own stream
	keepAlives                             int64 // ": keep-alive" comments from tether
	other                                  int64 // events the app did not expect
	requests                               int   // requests made: 1 while the first stream lasts
	ends                                   int   // streams that ended without the app asking
	endedBy                                string
	lastSeq                                int64  // the highest seq received
	lastID                                 string // the stream's last event ID
	gaveUp                                 string // why the EventSource failed for good; "" while it has not
}

// eventSource is the SSE demo's naive app, an EventSource as a browser
// implements one: a GET with Accept: text/event-stream, the body parsed
// event by event. Like a browser's, if its stream ends it waits the
// reconnection time (the stream's latest "retry", else browserRetry) and
// asks again with the last event ID it saw as Last-Event-ID; a refusal
// (a status other than 200, or another Content-Type) fails it for good.
// Behind tether its first stream should never end: every end is counted
// and narrated as a tether bug. It tracks the feed's seq numbers as a
// careful app would.
//
// One goroutine (run) reads and reconnects; Stats, Close and Done are safe
// for concurrent use. mu is never held across network I/O or narration.
type eventSource struct {
	url     string
	http    *http.Client
	tr      *http.Transport
	narr    *narrator
	ctx     context.Context // ends every request at Close
	cancel  context.CancelFunc
	closing atomic.Bool   // Close has started: the stream's end is ours
	done    chan struct{} // closed when run has returned
	once    sync.Once

	retry time.Duration // run goroutine only
	quiet time.Duration // a pause between events worth remarking on

	mu        sync.Mutex
	track     tracker
	stats     appStats
	lastEvent time.Time // when the latest new event arrived
	heardKeep bool      // the first keep-alive was narrated
}

// openEventSource makes the app's request to tether's sse:// endpoint at
// url and starts reading the stream of a feed publishing rate events per
// second. A refusal is an error. ctx bounds only this first request: the
// stream itself lasts until Close, so that on Ctrl-C the app ends it
// before tether drains.
func openEventSource(ctx context.Context, url string, rate int, n *narrator) (*eventSource, error) {
	tr := &http.Transport{DisableCompression: true, ResponseHeaderTimeout: clientDialTimeout}
	esCtx, cancel := context.WithCancel(context.Background())
	es := &eventSource{
		url:    url,
		tr:     tr,
		http:   &http.Client{Transport: tr},
		narr:   n,
		ctx:    esCtx,
		cancel: cancel,
		done:   make(chan struct{}),
		retry:  browserRetry,
		quiet:  max(appMinPause, 3*time.Second/time.Duration(max(rate, 1))),
	}
	interrupt := context.AfterFunc(ctx, cancel)
	resp, err := es.get("")
	if !interrupt() && err == nil {
		// ctx ended as the answer came: the request's context is gone.
		_ = resp.Body.Close()
		err = ctx.Err()
	}
	if err == nil {
		err = refused(resp)
	}
	if err != nil {
		cancel()
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("app: connect to tether: %w", err)
	}
	es.stats.requests = 1
	go es.run(resp)
	return es, nil
}

// get makes one request for the stream, as EventSource does.
func (es *eventSource) get(lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(es.ctx, http.MethodGet, es.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return es.http.Do(req)
}

// refused returns why a response is not an event stream, closing its
// body, or nil when it is one.
func refused(resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == http.StatusOK && mt == "text/event-stream" {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, appErrorBody))
	return fmt.Errorf("HTTP %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), strings.TrimSpace(string(body)))
}

// Done is closed once the app has stopped reading: after Close, or when
// its EventSource failed for good.
func (es *eventSource) Done() <-chan struct{} { return es.done }

// Close ends the app's request and waits for its reader. It is idempotent.
func (es *eventSource) Close() {
	es.once.Do(func() {
		es.closing.Store(true)
		es.cancel()
		<-es.done
		es.tr.CloseIdleConnections()
	})
}

// Stats returns a snapshot of what the app saw.
func (es *eventSource) Stats() appStats {
	es.mu.Lock()
	defer es.mu.Unlock()
	s := es.stats
	t := &es.track
	s.events, s.gaps, s.missed, s.duplicates, s.late = t.events, t.gaps, t.missed, t.duplicates, t.late
	s.announced, s.lastSeq = t.announced, t.last
	return s
}

// run reads streams until Close, reconnecting like an EventSource.
func (es *eventSource) run(resp *http.Response) {
	defer close(es.done)
	for resp != nil {
		err := es.read(resp)
		if es.closing.Load() {
			return
		}
		es.ended(err)
		resp = es.reconnect()
	}
}

// read parses one response's stream until it ends.
func (es *eventSource) read(resp *http.Response) error {
	defer func() { _ = resp.Body.Close() }()
	es.mu.Lock()
	last := es.stats.lastID
	es.mu.Unlock()
	// A browser carries the last event ID into the new stream.
	r := sse.NewReader(resp.Body, sse.Options{MaxEventSize: appMaxEvent, LastEventID: last})
	for {
		it, err := r.Next()
		if err != nil {
			return err
		}
		if it.Kind == sse.KindRetry {
			es.retry = it.Retry
		}
		es.item(it, r.LastEventID())
	}
}

// ended records a stream that ended without the app asking.
func (es *eventSource) ended(err error) {
	why := "tether ended the response"
	if !errors.Is(err, io.EOF) {
		why = "the connection failed: " + err.Error()
	}
	es.mu.Lock()
	es.stats.ends++
	if es.stats.endedBy == "" {
		es.stats.endedBy = why
	}
	last := es.stats.lastID
	es.mu.Unlock()
	es.narr.say(srcApp, "!!! the app's stream ended (%s). Like a browser's EventSource it reconnects in %s with Last-Event-ID: %s; "+
		"behind tether it should never have to. That is a tether bug.", why, fmtSetting(es.retry), last)
}

// reconnect waits the reconnection time and asks again, as EventSource
// does after a network error, until it gets a stream, Close is called
// (nil) or tether refuses (nil: the EventSource fails for good).
func (es *eventSource) reconnect() *http.Response {
	for wait(es.ctx, es.retry) {
		es.mu.Lock()
		last := es.stats.lastID
		es.stats.requests++
		es.mu.Unlock()
		resp, err := es.get(last)
		if err != nil {
			if es.closing.Load() {
				return nil
			}
			es.narr.say(srcApp, "!!! reconnecting failed: %v; next try in %s", err, fmtSetting(es.retry))
			continue
		}
		if err := refused(resp); err != nil {
			es.mu.Lock()
			es.stats.gaveUp = err.Error()
			es.mu.Unlock()
			es.narr.say(srcApp, "!!! tether refused the reconnect (%v): an EventSource gives up for good", err)
			return nil
		}
		return resp
	}
	return nil
}

// item accounts for one thing read from the stream; lastID is the
// stream's last event ID after it.
func (es *eventSource) item(it sse.Item, lastID string) {
	es.mu.Lock()
	es.stats.lastID = lastID
	var say func()
	switch it.Kind {
	case sse.KindEvent:
		say = es.eventLocked(it.Event)
	case sse.KindComment:
		if it.Comment == "keep-alive" {
			es.stats.keepAlives++
			if !es.heardKeep {
				es.heardKeep = true
				say = func() {
					es.narr.say(srcApp, "no event for a while, but the stream is open: tether writes \": keep-alive\" comments "+
						"(EventSource ignores them; proxies on the way see a live stream)")
				}
			}
		}
	}
	es.mu.Unlock()
	if say != nil {
		say()
	}
}

// eventLocked accounts for one event and returns what to narrate about it,
// or nil. es.mu is held.
func (es *eventSource) eventLocked(ev sse.Event) func() {
	switch ev.Type {
	case "tether-gap":
		es.stats.tetherGaps++
		return func() {
			es.narr.say(srcApp, "!!! tether-gap event %s: tether could not resume the app's own stream", ev.Data)
		}
	case "tether-close":
		return func() { es.narr.say(srcApp, "!!! tether-close event %s: tether is ending the app's stream", ev.Data) }
	case sse.DefaultType:
	default:
		es.stats.other++
		return nil
	}
	var m feedMessage
	_ = json.Unmarshal([]byte(ev.Data), &m) // anything unparsable counts as "other"
	switch m.T {
	case "event":
		return es.seqLocked(m.Seq, ev.ID)
	case "gap":
		es.stats.notices++
		es.track.announce(m.From, m.To)
		return func() {
			es.narr.say(srcApp, "tether says events %d–%d are lost for good (gap notice); the app reads on", m.From, m.To)
		}
	}
	es.stats.other++
	return nil
}

// seqLocked tracks one event's number and returns what to narrate: the
// first event, events flowing again after a pause, or (behind tether,
// bugs) a gap, a duplicate, an event out of order. es.mu is held.
func (es *eventSource) seqLocked(seq int64, id string) func() {
	now := es.narr.now()
	pause := now.Sub(es.lastEvent)
	o := es.track.observe(seq)
	if o.kind == seqFirst || o.kind == seqNext || o.kind == seqGap {
		es.lastEvent = now
	}
	switch {
	case o.kind == seqFirst:
		return func() {
			es.narr.say(srcApp, "first event: seq %d, with tether's id %s (the session's token, a dash, "+
				"its event count: what the app would send back as Last-Event-ID)", seq, id)
		}
	case o.kind == seqNext && pause >= es.quiet:
		return func() {
			es.narr.say(srcApp, "events flow again after %.1fs of quiet: %d follows %d, nothing lost, nothing twice; "+
				"the app's stream never closed", pause.Seconds(), seq, o.last)
		}
	case o.kind == seqGap:
		return func() {
			es.narr.say(srcApp, "!!! %s: %s missing without notice; tether should have replayed it or said so",
				gapName(o.gap), plural(o.gap.len(), "event", "events"))
		}
	case o.kind == seqDuplicate:
		return func() { es.narr.say(srcApp, "!!! duplicate: event %d arrived again (after %d)", seq, o.last) }
	case o.kind == seqLate:
		return func() { es.narr.say(srcApp, "!!! out of order: event %d arrived after %d", seq, o.last) }
	}
	return nil
}
