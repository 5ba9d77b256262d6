package demo

import (
	"context"
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
)

// eventSource is the SSE demo's naive app, an EventSource as a browser
// implements one: a GET with Accept: text/event-stream, the body parsed
// event by event. Like a browser's, if its stream ends it waits the
// reconnection time (the stream's latest "retry", else browserRetry) and
// asks again with the last event ID it saw as Last-Event-ID; a refusal
// (a status other than 200, or another Content-Type) fails it for good.
// Behind tether its first stream should never end: every end is counted
// and narrated as a tether bug. Its ledger tracks the feed's seq numbers as
// a careful app would.
//
// One goroutine (run) reads and reconnects; Stats, Close and Done are safe
// for concurrent use.
type eventSource struct {
	url  string
	http *http.Client
	tr   *http.Transport
	*ledger
	ctx     context.Context // ends every request at Close
	cancel  context.CancelFunc
	closing atomic.Bool   // Close has started: the stream's end is ours
	done    chan struct{} // closed when run has returned
	once    sync.Once
	retry   time.Duration // run goroutine only
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
		ledger: newLedger(n, rate),
		ctx:    esCtx,
		cancel: cancel,
		done:   make(chan struct{}),
		retry:  browserRetry,
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
	es.requested()
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

// run reads streams until Close, reconnecting like an EventSource.
func (es *eventSource) run(resp *http.Response) {
	defer close(es.done)
	for resp != nil {
		err := es.read(resp)
		if es.closing.Load() {
			return
		}
		es.lost(err)
		resp = es.reconnect()
	}
}

// read parses one response's stream until it ends.
func (es *eventSource) read(resp *http.Response) error {
	defer func() { _ = resp.Body.Close() }()
	// A browser carries the last event ID into the new stream.
	r := sse.NewReader(resp.Body, sse.Options{MaxEventSize: appMaxEvent, LastEventID: es.Stats().lastID})
	for {
		it, err := r.Next()
		if err != nil {
			return err
		}
		switch {
		case it.Kind == sse.KindRetry:
			es.retry = it.Retry
		case it.Kind == sse.KindComment && it.Comment == "keep-alive":
			es.keepAlive()
		case it.Kind == sse.KindEvent && it.Event.Type == sse.DefaultType:
			es.message([]byte(it.Event.Data), r.LastEventID())
		case it.Kind == sse.KindEvent:
			es.setLastID(r.LastEventID())
			es.tetherEvent(it.Event.Type, it.Event.Data)
		case it.Kind == sse.KindID:
			es.setLastID(r.LastEventID())
		}
	}
}

// lost records a stream that ended without the app asking.
func (es *eventSource) lost(err error) {
	why := "tether ended the response"
	if !errors.Is(err, io.EOF) {
		why = "the connection failed: " + err.Error()
	}
	last := es.ended(why)
	es.say("!!! the app's stream ended (%s). Like a browser's EventSource it reconnects in %s with Last-Event-ID: %s; "+
		"behind tether it should never have to. That is a tether bug.", why, fmtSetting(es.retry), last)
}

// reconnect waits the reconnection time and asks again, as EventSource
// does after a network error, until it gets a stream, Close is called
// (nil) or tether refuses (nil: the EventSource fails for good).
func (es *eventSource) reconnect() *http.Response {
	for wait(es.ctx, es.retry) {
		resp, err := es.get(es.requested())
		if err != nil {
			if es.closing.Load() {
				return nil
			}
			es.say("!!! reconnecting failed: %v; next try in %s", err, fmtSetting(es.retry))
			continue
		}
		if err := refused(resp); err != nil {
			es.failed(err.Error())
			es.say("!!! tether refused the reconnect (%v): an EventSource gives up for good", err)
			return nil
		}
		return resp
	}
	return nil
}
