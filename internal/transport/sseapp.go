package transport

import (
	"context"
	"encoding/binary"
	"net/http"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// SSEApp is an sse:// app as its session sees it. Unlike a socket it
// outlives the app's connections: an EventSource reconnects by itself,
// with a new HTTP request carrying the id of the last event it got, so the
// session stays when a request ends and keeps its upstream connection and
// its events for SSEOptions.Linger. A request that names it within that
// time attaches to it and is written every event after its id, then the
// live ones; a session nobody comes back to ends, as a WebSocket session
// ends when its app closes.
//
// Events are numbered, encoded once with their id, and kept in an sseLog
// bounded by SSEOptions.QueueBytes (the log's comment says what it keeps);
// the events not yet written count in a sendq.Queue, so Send blocks as it
// does towards any app. The request being served (an SSEAttachment) has
// its own writer: its handler goroutine, in Stream, which takes whatever is
// pending at once (so a lone event costs one write and a backlog few large
// ones), writes it and flushes (ssestream.go).
//
// Concurrency: ReadMessage is called by the session's reader only; it
// returns once the app side is over. Send, SendBatch, Close, Abort, Done
// and Queued are safe for concurrent use, and so are Attach and Stream,
// each request's handler making its own; Append and AppendID are called
// by the batch's goroutine. mu guards everything but the channels' closing, which it
// orders; q is closed once the session is closing (no more events).
type SSEApp struct {
	token string
	opts  SSEOptions

	mu        sync.Mutex
	q         sendq.Queue // counts the pending events (log.pending) against QueueBytes
	log       sseLog
	att       *SSEAttachment // the request being served; nil while the app is away
	attaches  uint64         // requests attached so far: a linger timer knows its own
	closeNote []byte         // tether-close, written last to the request being served
	linger    *time.Timer    // ends the session if no request attaches in time
	finished  bool           // done is closed

	ended  chan struct{} // closed once closing: ReadMessage returns endErr
	endErr error
	done   chan struct{} // closed once closing and no request is served any more
}

// SSEOptions configures an SSEApp.
type SSEOptions struct {
	QueueBytes int64         // all events kept, written or not (0: wsconn's default)
	Linger     time.Duration // how long the session waits for the app to come back; 0: it does not
	KeepAlive  time.Duration // idle time before a keep-alive comment (0: DefaultSSEKeepAlive)
	CloseWait  time.Duration // how long Close waits for the app to take the rest
	JSON       bool          // upstream messages are {"id","event","data"}: re-emit them
	Log        *zap.Logger
	Account    *budget.Account // the memory budget's account of the session (sendq.Options.Account, and the written events kept); nil: none
}

// DefaultSSEKeepAlive is SSEOptions.KeepAlive when it is 0.
const DefaultSSEKeepAlive = 15 * time.Second

// SSEAttachment is one HTTP request serving an sse:// app. Its handler
// goroutine writes it (Stream); other goroutines reach its connection only
// to set a write deadline, under SSEApp.mu and before the handler has
// returned (finished), after which the ResponseController must not be used.
type SSEAttachment struct {
	rc       *http.ResponseController
	wake     chan struct{} // one slot: events were queued, or the request must end
	notice   []byte        // written first: an id block or a tether-gap event
	stop     bool          // superseded or aborted: end now, write nothing more
	finished bool          // the handler is done with rc
}

// NewSSEAttachment makes the request whose response w is ready to serve
// an SSEApp (Attach, then Stream).
func NewSSEAttachment(w http.ResponseWriter) *SSEAttachment {
	return &SSEAttachment{rc: http.NewResponseController(w), wake: make(chan struct{}, 1)}
}

// kick wakes the attachment's writer.
func (att *SSEAttachment) kick() {
	select {
	case att.wake <- struct{}{}:
	default:
	}
}

// deadlineLocked bounds the attachment's writes from now on, so a writer
// blocked on an app that stopped reading gives up. SSEApp.mu is held: the
// handler cannot have returned meanwhile. Setting a deadline does not block.
func (att *SSEAttachment) deadlineLocked(t time.Time) {
	if !att.finished {
		_ = att.rc.SetWriteDeadline(t)
	}
}

// NewSSEApp makes the app side of a new sse:// session, with no request
// attached yet.
func NewSSEApp(opts SSEOptions) *SSEApp {
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
	a := &SSEApp{
		token: newSSEToken(),
		opts:  opts,
		log:   newSSELog(opts.QueueBytes),
		ended: make(chan struct{}),
		done:  make(chan struct{}),
	}
	a.q.Init(&a.mu, sendq.Options{Limit: opts.QueueBytes, Closed: ErrSSEClosed, Wake: a.wakeWriter, Account: opts.Account})
	return a
}

// Token names the session in its event ids ("<token>-<n>"): a request
// whose Last-Event-ID carries it resumes this session.
func (a *SSEApp) Token() string { return a.token }

// wakeWriter wakes the writer of the request being served, if any
// (sendq.Options.Wake; a.mu is held).
func (a *SSEApp) wakeWriter() {
	if a.att != nil {
		a.att.kick()
	}
}

// idLineMax bounds the "id" line and blank line appended to an event:
// "id: ", the token, "-", a uint64 and two line feeds.
const idLineMax = len("id: ") + maxTokenLen + 1 + 20 + 2

// Send queues one upstream message as an event. It blocks while the
// pending events fill the buffer, until ctx ends or the session closes.
func (a *SSEApp) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	_, err := a.queue(ctx, []sseEvent{a.encode(op, p, "")})
	return err
}

// sseEvent is an event encoded without its id line and blank line, and the
// upstream's id for it ("" when the upstream gave none: tether numbers it).
type sseEvent struct {
	b  []byte
	id string
}

// Append adds one upstream message to b, to become an event when
// SendBatch queues it: an event's id is known only then. p is copied.
func (a *SSEApp) Append(b *sendq.Batch, op ws.OpCode, p []byte) { a.AppendID(b, op, p, "") }

// AppendID is Append for a message the session has a name for: the id its
// event carries, unless a JSON message carries the upstream's own
// (SSEOptions.JSON). id is an SSE upstream's id with
// TETHER_SSE_FORMAT=data, or the "<stream>:<seq>" sequencing gives a
// numbered message (sequence.EventID); "" and an id an event cannot carry
// (a line break, a NUL) leave tether's "<token>-<n>".
func (a *SSEApp) AppendID(b *sendq.Batch, op ws.OpCode, p []byte, id string) {
	w := b.Add()
	w.B = append(w.B, byte(op))
	w.B = binary.AppendUvarint(w.B, uint64(len(id)))
	w.B = append(w.B, id...)
	w.B = binary.AppendUvarint(w.B, uint64(len(p)))
	w.B = append(w.B, p...)
	w.Count += int64(len(p))
}

// SendBatch queues the messages of b as events, in order, and empties b.
// Each event is taken as Send would take it, so the buffer's bound is kept
// event by event: events that fit are queued under one lock, and for the
// rest SendBatch blocks as Send does. It returns how many it queued; with
// an error (ctx ended, the session closed), the rest were not.
func (a *SSEApp) SendBatch(ctx context.Context, b *sendq.Batch) (int, error) {
	w, n := b.Take()
	if w == nil {
		return 0, nil
	}
	events := make([]sseEvent, 0, n)
	for rest := w.B; len(rest) > 0; {
		op := ws.OpCode(rest[0])
		var id, p []byte
		id, rest = cutUvarintBytes(rest[1:])
		p, rest = cutUvarintBytes(rest)
		events = append(events, a.encode(op, p, string(id)))
	}
	sendq.PutBuf(w)
	return a.queue(ctx, events)
}

// cutUvarintBytes splits off the length-prefixed bytes AppendID wrote at
// the start of b.
func cutUvarintBytes(b []byte) (field, rest []byte) {
	size, k := binary.Uvarint(b)
	end := k + int(size)
	return b[k:end], b[end:]
}

// queue adds encoded events to the log, each once it fits: as many as fit
// under one lock, waiting for room before the next one that does not. It
// returns how many it added.
func (a *SSEApp) queue(ctx context.Context, events []sseEvent) (int, error) {
	added := 0
	for added < len(events) {
		if err := a.q.Reserve(ctx, eventSize(events[added])); err != nil {
			return added, err
		}
		for {
			a.addLocked(events[added])
			added++
			if added == len(events) || !a.q.FitsLocked(eventSize(events[added])) {
				break
			}
		}
		a.mu.Unlock()
	}
	return added, nil
}

// eventSize is what an encoded event reserves: its bytes and its id line
// (the longest of tether's, when it gets one).
func eventSize(e sseEvent) int64 {
	if e.id != "" {
		return int64(len(e.b) + len("id: ") + len(e.id) + 2)
	}
	return int64(len(e.b) + idLineMax)
}

// addLocked numbers an encoded event and adds it to the log, making room by
// evicting written events. a.mu is held, and the event fits (q.Reserve).
// Its id line is the upstream's id, or tether's "<token>-<n>".
func (a *SSEApp) addLocked(e sseEvent) {
	a.log.evict(eventSize(e))
	// The id goes last: a field may stand anywhere in its block, and the
	// number is known only now, under the lock.
	b := e.b
	if e.id != "" {
		b = append(append(append(b, "id: "...), e.id...), '\n')
	} else {
		b = appendIDLine(b, a.token, a.log.next)
	}
	b = append(b, '\n')
	a.log.add(b, e.id)
	a.q.AddLocked(int64(len(b)))
	a.log.keep(a.opts.Account) // what evict took from the written events
}

// encode writes the event's type and data lines, without the blank line
// that ends the block (addLocked adds the id first), and keeps the id it
// carries: the one a JSON message holds, else named (AppendID), else none
// (tether numbers it).
func (a *SSEApp) encode(op ws.OpCode, p []byte, named string) sseEvent {
	ev := sseEventOf(op, p, a.opts.JSON)
	id := ev.ID
	if id == "" && eventIDWritable(named) {
		id = named
	}
	ev.ID = ""
	b, err := sse.AppendEvent(make([]byte, 0, len(ev.Type)+len(ev.Data)+32+max(idLineMax, len(id)+6)), ev, false)
	if err != nil {
		// sseEventOf never returns a type holding a line break, and
		// without an id nothing else can fail.
		panic(err)
	}
	return sseEvent{b: b[:len(b)-1], id: id}
}

// HoldsID reports whether the session's log holds an event with the
// upstream's id (the latest such event: the upstream may repeat an id),
// whose number a resume after it gives Attach, and whether a request is
// attached now.
func (a *SSEApp) HoldsID(id string) (n uint64, attached, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.q.Closed() {
		return 0, false, false
	}
	n, ok = a.log.findID(id)
	return n, a.att != nil, ok
}

// ReadMessage blocks until the app side of the session is over: the
// session was closed, or the app did not come back within the linger
// time. An sse:// app sends nothing.
func (a *SSEApp) ReadMessage() (ws.OpCode, []byte, error) {
	<-a.ended
	return 0, nil, a.endErr
}

// Close ends the session's app side: the request being served, if any, is
// written what is pending, then a tether-close event with code and reason
// (what a WebSocket app would read in its close frame), then its response
// ends; within CloseWait, or it is cut. With no request attached, the
// session ends at once. Later calls do nothing.
func (a *SSEApp) Close(code ws.StatusCode, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.q.Closed() {
		return
	}
	if att := a.att; att != nil {
		a.closeNote = appendNotice(nil, sseCloseEvent, closeNotice{Code: int(code), Reason: reason}, "", false)
		att.deadlineLocked(time.Now().Add(a.opts.CloseWait))
		att.kick()
	}
	a.endLocked(ErrSSEClosed)
}

// Abort ends the session's app side at once: the request being served
// stops writing, its pending write failing now.
func (a *SSEApp) Abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if att := a.att; att != nil {
		att.stop = true
		att.deadlineLocked(time.Now())
		att.kick()
	}
	a.endLocked(ErrSSEClosed)
}

// endLocked marks the app side over, with the error ReadMessage returns.
// a.mu is held.
func (a *SSEApp) endLocked(err error) {
	if a.q.CloseLocked() { // a Send waiting for room returns ErrSSEClosed now
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
func (a *SSEApp) finishLocked() {
	if a.q.Closed() && a.att == nil && !a.finished {
		a.finished = true
		close(a.done)
	}
}

// Done is closed once the app side is over and the last request has ended.
func (a *SSEApp) Done() <-chan struct{} { return a.done }

// Queued reports the bytes of events not yet written to the app.
func (a *SSEApp) Queued() int64 { return a.q.Queued() }

// Attach makes att the request serving the app, ending the one it
// replaces (an app whose old connection tether has not seen die yet: the
// newest request is the live one). With resume, the stream restarts after
// event after; otherwise it starts with the next event, and a gap reason
// (one of the Gap* constants, or "") says why a new session replaces the
// one the app asked for. att.notice is set to what the app must read first.
// It returns the events a resume skips because the buffer no longer holds
// them, and false when the session is ending: the app must start anew.
func (a *SSEApp) Attach(att *SSEAttachment, after uint64, resume bool, gap string) (lost uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.q.Closed() {
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
		a.log.keep(a.opts.Account) // written events pending again count in the queue
		a.q.SetQueuedLocked(a.log.pending)
	}
	from := eventID(a.token, a.log.cursor-1)
	switch {
	case lost > 0:
		att.notice = appendNotice(nil, sseGapEvent, gapNotice{Reason: GapEvicted, Lost: lost}, from, true)
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
func (a *SSEApp) detach(att *SSEAttachment) (lingers bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	att.finished = true
	if a.att != att {
		return false // replaced: the new request carries on
	}
	a.att = nil
	switch {
	case a.q.Closed():
		a.finishLocked()
		return false
	case a.opts.Linger <= 0:
		a.endLocked(ErrSSEAppGone)
		return false
	}
	n := a.attaches
	a.linger = time.AfterFunc(a.opts.Linger, func() { a.expire(n) })
	return true
}

// expire ends a session whose app did not come back after attachment n.
func (a *SSEApp) expire(n uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.att == nil && a.attaches == n && !a.q.Closed() {
		a.endLocked(ErrSSELingerExpired)
	}
}

// take returns what att's writer must do next: write parts (pending
// events, up to max bytes, then call wrote with upTo), write note and end
// (the session closed; note is nil when Close had nothing to say), stop at
// once (aborted, or replaced by a newer request), or wait.
func (a *SSEApp) take(att *SSEAttachment, parts [][]byte, max int64) (_ [][]byte, upTo uint64, note []byte, next sseStep) {
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
	case a.q.Closed():
		note, a.closeNote = a.closeNote, nil
		return parts, 0, note, sseEnd
	}
	a.q.IdleLocked() // the next event queued wakes att
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
func (a *SSEApp) wrote(att *SSEAttachment, upTo uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.log.pending
	if a.att == att && !att.stop {
		a.log.wrote(upTo)
	}
	a.q.ReleaseLocked(before - a.log.pending)
	a.log.keep(a.opts.Account)
}
