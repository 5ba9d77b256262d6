package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// sseApp is an sse:// app as its Session sees it (appConn). Unlike a
// socket it outlives the app's connections: an EventSource reconnects by
// itself, with a new HTTP request carrying the id of the last event it got,
// so the session stays when a request ends and keeps its upstream
// connection and its events for Options.SSELinger. A request that names it
// within that time attaches to it and is written every event after its id,
// then the live ones; a session nobody comes back to ends, as a WebSocket
// session ends when its app closes.
//
// Events are numbered, encoded once with their id, and kept in an sseLog
// bounded by Options.DownstreamBufferBytes (the log's comment says what it
// keeps and how Send blocks). The request being served (an
// sseAttachment) has its own writer: its handler goroutine, which takes
// whatever is pending at once (so a lone event costs one write and a
// backlog few large ones), writes it and flushes (ssestream.go).
//
// Concurrency: ReadMessage is called by the session's reader only; it
// returns once the app side is over. Send, Close, Abort, Done and Queued
// are safe for concurrent use, and so are attach, detach and the writer's
// calls, each request's handler making its own. mu guards everything but
// the channels' closing, which it orders.
type sseApp struct {
	token string
	opts  sseOptions

	mu        sync.Mutex
	log       sseLog
	att       *sseAttachment // the request being served; nil while the app is away
	attaches  uint64         // requests attached so far: a linger timer knows its own
	closing   bool           // no more events: the session is ending
	closeNote []byte         // tether-close, written last to the request being served
	linger    *time.Timer    // ends the session if no request attaches in time
	space     chan struct{}  // closed and replaced when pending bytes were written
	waiting   bool           // a Send waits on space
	finished  bool           // done is closed

	ended  chan struct{} // closed once closing: ReadMessage returns endErr
	endErr error
	done   chan struct{} // closed once closing and no request is served any more
}

// sseOptions configures an sseApp.
type sseOptions struct {
	QueueBytes int64         // all events kept, written or not (0: wsconn's default)
	Linger     time.Duration // how long the session waits for the app to come back; 0: it does not
	KeepAlive  time.Duration // idle time before a keep-alive comment
	CloseWait  time.Duration // how long Close waits for the app to take the rest
	JSON       bool          // upstream messages are {"id","event","data"}: re-emit them
	Log        *zap.Logger
}

// sseAttachment is one HTTP request serving an sse:// app. Its handler
// goroutine writes it (ssestream.go); other goroutines reach its connection
// only to set a write deadline, under sseApp.mu and before the handler has
// returned (finished), after which the ResponseController must not be used.
type sseAttachment struct {
	rc       *http.ResponseController
	wake     chan struct{} // one slot: events were queued, or the request must end
	notice   []byte        // written first: an id block or a tether-gap event
	stop     bool          // superseded or aborted: end now, write nothing more
	finished bool          // the handler is done with rc
}

func newAttachment(w http.ResponseWriter) *sseAttachment {
	return &sseAttachment{rc: http.NewResponseController(w), wake: make(chan struct{}, 1)}
}

// kick wakes the attachment's writer.
func (att *sseAttachment) kick() {
	select {
	case att.wake <- struct{}{}:
	default:
	}
}

// deadlineLocked bounds the attachment's writes from now on, so a writer
// blocked on an app that stopped reading gives up. sseApp.mu is held: the
// handler cannot have returned meanwhile. Setting a deadline does not block.
func (att *sseAttachment) deadlineLocked(t time.Time) {
	if !att.finished {
		_ = att.rc.SetWriteDeadline(t)
	}
}

func newSSEApp(opts sseOptions) *sseApp {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = wsconn.DefaultQueueBytes
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = wsconn.DefaultCloseWait
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultSSEKeepAlive
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	return &sseApp{
		token: newSSEToken(),
		opts:  opts,
		log:   newSSELog(opts.QueueBytes),
		space: make(chan struct{}),
		ended: make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// idLineMax bounds the "id" line and blank line appended to an event:
// "id: ", the token, "-", a uint64 and two line feeds.
const idLineMax = len("id: ") + maxTokenLen + 1 + 20 + 2

// Send queues one upstream message as an event. It blocks while the
// pending events fill the buffer, until ctx ends or the session does.
func (a *sseApp) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	b := a.encode(op, p)
	size := int64(len(b) + idLineMax)
	for {
		a.mu.Lock()
		if a.closing {
			a.mu.Unlock()
			return errSSEClosed
		}
		if a.log.fits(size) {
			// The id goes last: a field may stand anywhere in its block,
			// and the number is known only now, under the lock.
			b = appendIDLine(b, a.token, a.log.next)
			a.log.add(append(b, '\n'))
			if a.att != nil {
				a.att.kick()
			}
			a.mu.Unlock()
			return nil
		}
		a.waiting = true
		wake := a.space
		a.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-a.ended:
			return errSSEClosed
		}
	}
}

// encode writes the event's type and data lines, without the blank line
// that ends the block (Send adds the id first).
func (a *sseApp) encode(op ws.OpCode, p []byte) []byte {
	ev := sseEventOf(op, p, a.opts.JSON)
	b, err := sse.AppendEvent(make([]byte, 0, len(ev.Type)+len(ev.Data)+32+idLineMax), ev, false)
	if err != nil {
		// sseEventOf never returns a type holding a line break, and
		// without an id nothing else can fail.
		panic(err)
	}
	return b[:len(b)-1]
}

// ReadMessage blocks until the app side of the session is over: the
// session was closed, or the app did not come back within the linger
// time. An sse:// app sends nothing.
func (a *sseApp) ReadMessage() (ws.OpCode, []byte, error) {
	<-a.ended
	return 0, nil, a.endErr
}

// Close ends the session's app side: the request being served, if any, is
// written what is pending, then a tether-close event with code and reason
// (what a WebSocket app would read in its close frame), then its response
// ends; within CloseWait, or it is cut. With no request attached, the
// session ends at once. Later calls do nothing.
func (a *sseApp) Close(code ws.StatusCode, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return
	}
	if att := a.att; att != nil {
		a.closeNote = appendNotice(nil, sseCloseEvent, closeNotice{Code: int(code), Reason: reason}, "", false)
		att.deadlineLocked(time.Now().Add(a.opts.CloseWait))
		att.kick()
	}
	a.endLocked(errSSEClosed)
}

// Abort ends the session's app side at once: the request being served
// stops writing, its pending write failing now.
func (a *sseApp) Abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if att := a.att; att != nil {
		att.stop = true
		att.deadlineLocked(time.Now())
		att.kick()
	}
	a.endLocked(errSSEClosed)
}

// endLocked marks the app side over, with the error ReadMessage returns.
// a.mu is held.
func (a *sseApp) endLocked(err error) {
	if !a.closing {
		a.closing = true
		a.endErr = err
		close(a.ended)
		if a.linger != nil {
			a.linger.Stop()
			a.linger = nil
		}
	}
	a.finishLocked()
}

// finishLocked closes done once the app side is over and no request is
// served. a.mu is held.
func (a *sseApp) finishLocked() {
	if a.closing && a.att == nil && !a.finished {
		a.finished = true
		close(a.done)
	}
}

// Done is closed once the app side is over and the last request has ended.
func (a *sseApp) Done() <-chan struct{} { return a.done }

// Queued reports the bytes of events not yet written to the app.
func (a *sseApp) Queued() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.pending
}

// attach makes att the request serving the app, ending the one it
// replaces (an app whose old connection tether has not seen die yet: the
// newest request is the live one). With resume, the stream restarts after
// event after; otherwise it starts with the next event, and a gap reason
// (one of the gap* constants, or "") says why a new session replaces the
// one the app asked for. att.notice is set to what the app must read first.
// It returns the events a resume skips because the buffer no longer holds
// them, and false when the session is ending: the app must start anew.
func (a *sseApp) attach(att *sseAttachment, after uint64, resume bool, gap string) (lost uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return 0, false
	}
	if old := a.att; old != nil {
		old.stop = true
		old.deadlineLocked(time.Now())
		old.kick()
	}
	if a.linger != nil {
		a.linger.Stop()
		a.linger = nil
	}
	a.attaches++
	a.att = att
	if resume {
		lost = a.log.resume(after)
	}
	from := eventID(a.token, a.log.cursor-1)
	switch {
	case lost > 0:
		att.notice = appendNotice(nil, sseGapEvent, gapNotice{Reason: gapEvicted, Lost: lost}, from, true)
	case gap != "":
		att.notice = appendNotice(nil, sseGapEvent, gapNotice{Reason: gap}, from, true)
	case !resume:
		// A new stream starts by setting the app's last event id, so
		// that an app that reconnects before its first event still names
		// this session.
		att.notice = append(append([]byte("id: "), from...), "\n\n"...)
	}
	if a.log.pending > 0 {
		att.kick()
	}
	return lost, true
}

// detach ends att's part: the app went away or att was replaced. The
// session then waits Linger for a new request, or ends now when it was
// closing or does not linger. It reports whether the session waits.
func (a *sseApp) detach(att *sseAttachment) (lingers bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	att.finished = true
	if a.att != att {
		return false // replaced: the new request carries on
	}
	a.att = nil
	switch {
	case a.closing:
		a.finishLocked()
		return false
	case a.opts.Linger <= 0:
		a.endLocked(errSSEAppGone)
		return false
	}
	n := a.attaches
	a.linger = time.AfterFunc(a.opts.Linger, func() { a.expire(n) })
	return true
}

// expire ends a session whose app did not come back after attachment n.
func (a *sseApp) expire(n uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.att == nil && a.attaches == n && !a.closing {
		a.endLocked(errSSELingerExpired)
	}
}

// take returns what att's writer must do next: write parts (pending
// events, up to max bytes, then call wrote with upTo), write note and end
// (the session closed; note is nil when Close had nothing to say), stop at
// once (aborted, or replaced by a newer request), or wait.
func (a *sseApp) take(att *sseAttachment, parts [][]byte, max int64) (_ [][]byte, upTo uint64, note []byte, next sseStep) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.att != att:
		return parts, 0, nil, sseReplaced
	case att.stop:
		return parts, 0, nil, sseStop
	case a.log.pending > 0:
		parts, upTo = a.log.take(parts, max)
		return parts, upTo, nil, sseWrite
	case a.closing:
		note, a.closeNote = a.closeNote, nil
		return parts, 0, note, sseEnd
	}
	return parts, 0, nil, sseWait
}

// sseStep is what an attachment's writer does next (take).
type sseStep int

const (
	sseWait     sseStep = iota // nothing pending: wait for a wake-up or the keep-alive
	sseWrite                   // write the events taken
	sseEnd                     // write the close note, then end the response
	sseStop                    // end the response now: the session was aborted
	sseReplaced                // end the response now: a newer request serves the app
)

// wrote records that att wrote the events before upTo, and wakes a Send
// waiting for room. A replaced attachment's writes do not count: the new
// request resumed from the app's own last id.
func (a *sseApp) wrote(att *sseAttachment, upTo uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.att == att && !att.stop {
		a.log.wrote(upTo)
	}
	if a.waiting {
		close(a.space)
		a.space = make(chan struct{})
		a.waiting = false
	}
}
