package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The feed's wire protocol: DESIGN.md's worked example of a resumable feed.
const (
	ackMessage = `{"t":"ack"}`
	// replayWindow is how much history the feed keeps for resumes and HTTP
	// catch-up, in seconds of events: an outage longer than that (a
	// restart that keeps refusing, an overload) is answered with a snapshot
	// instead of a replay.
	replayWindow = 3
)

// feedOptions configures a feed.
type feedOptions struct {
	rate int        // events per second
	keep int        // events kept for replay; 0: replayWindow seconds' worth
	rng  *rand.Rand // the price walk; used only by the publisher goroutine
	now  func() time.Time
}

// feedStats counts what the feed published and how each event reached
// tether.
type feedStats struct {
	published int64 // events numbered
	delivered int64 // events written to a live connection as they were published
	replayed  int64 // events re-sent in answer to a resume
	snapshots int64 // resumes answered with a snapshot: the buffer no longer reached back
	served    int64 // events served over HTTP catch-up
	dropped   int64 // events a hiccup did not send
	repeated  int64 // events a hiccup sent twice
}

// feed is the demo's upstream: a price feed on upstreamtest.Server that
// numbers its events within a session and keeps the last keep of them. A
// connection speaks first: a subscription starts the session (answered by
// a welcome carrying the session id, then the subscription's answer), and
// {"t":"resume","session":S,"after":N} on a later connection is answered
// by a welcome and a replay of the events after N, or, when the buffer no
// longer reaches back to N+1, by a welcome with resync:true and a snapshot.
// The session remembers its subscription; a repeated one is answered again
// (with its request id). Events published while no connection streams are
// only kept; the same history is served over HTTP at /catchup?from=F&to=T.
// It serves one subscriber: a new connection supersedes the previous one.
//
// Its fault methods (reset, stall, restart, overload, hiccup) act on the
// live connection. All methods are safe for concurrent use; replays and live
// events are written under mu, so a connection sees them in order (writes go
// to tether on loopback and fail at once on a dead connection).
type feed struct {
	srv     *upstreamtest.Server
	catchUp *catchUpServer
	opts    feedOptions
	price   float64 // publisher goroutine only
	cancel  context.CancelFunc
	done    chan struct{} // closed when the publisher has returned

	mu          sync.Mutex
	live        *upstreamtest.Conn   // the current connection; nil while down or stalled
	streaming   bool                 // live has subscribed or resumed: it receives events
	stale       []*upstreamtest.Conn // stalled, closed once superseded
	session     string               // the session id; "" before the first subscription
	epoch       time.Time            // when numbering began (moved on after stalls)
	history     []string             // the last keep events, the newest last
	stats       feedStats
	up          chan struct{} // closed while live streams
	refuseUntil time.Time     // restart: handshakes answered 502 until then
	refuseNext  int           // overload: refuse this many handshakes with 503
	hiccup      hiccup        // events to drop and repeat on the live connection
}

// hiccup is a broker glitch on the live connection: drop events are not
// sent, then the repeat events sent just before them go out again.
type hiccup struct {
	drop, repeat int
	dropped      int // dropped so far
}

// startFeed listens on 127.0.0.1:0 (WebSocket and HTTP catch-up) and starts
// the publisher.
func startFeed(opts feedOptions) (*feed, error) {
	if opts.keep <= 0 {
		opts.keep = replayWindow * opts.rate
	}
	f := &feed{opts: opts, price: 100, done: make(chan struct{}), up: make(chan struct{})}
	srv, err := upstreamtest.NewServer(upstreamtest.Options{Handshake: f.handshake, OnConn: f.serveConn})
	if err != nil {
		return nil, fmt.Errorf("start feed: %w", err)
	}
	f.catchUp, err = startCatchUp(f.serveCatchUp)
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("start feed: %w", err)
	}
	f.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.publish(ctx)
	return f, nil
}

// URL is the feed's ws:// address.
func (f *feed) URL() string { return f.srv.URL() }

// CatchUpURL is the address of the HTTP catch-up endpoint, without query.
func (f *feed) CatchUpURL() string { return f.catchUp.url() }

// Close stops the publisher and the servers; it waits for all their
// goroutines and is idempotent.
func (f *feed) Close() {
	f.cancel()
	<-f.done
	f.catchUp.close()
	_ = f.srv.Close()
}

// Stats returns the publication counters.
func (f *feed) Stats() feedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// healthy returns a channel that is closed while a live connection streams.
// Faults wait for it, so each one hits a working feed.
func (f *feed) healthy() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up
}

// handshake refuses connections while a restart or an overload is in effect.
func (f *feed) handshake(upstreamtest.Handshake) (int, http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.refuseNext > 0:
		f.refuseNext--
		return http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}
	case f.opts.now().Before(f.refuseUntil):
		// What a load balancer answers while the service behind it restarts.
		return http.StatusBadGateway, nil
	}
	return 0, nil
}

// request is what a client sends the feed.
type request struct {
	T       string          `json:"t"`
	Channel string          `json:"channel"`
	ID      json.RawMessage `json:"id"`
	Session string          `json:"session"`
	After   int64           `json:"after"`
}

// serveConn runs one connection: it becomes the live one and answers what
// the client sends until the connection ends.
func (f *feed) serveConn(c *upstreamtest.Conn) {
	f.attach(c)
	defer f.detach(c)
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m request
		if json.Unmarshal(data, &m) != nil {
			m = request{}
		}
		f.mu.Lock()
		switch m.T {
		case "resume":
			f.resumeLocked(c, m.Session, m.After)
		case "sub":
			f.subscribeLocked(c, m)
		default:
			// A failed write ends the connection; the next Read reports it.
			_ = c.Send(ackMessage)
		}
		f.mu.Unlock()
	}
}

func welcome(session string, seq int64, resync bool) string {
	return fmt.Sprintf(`{"t":"welcome","session":%q,"seq":%d,"resync":%t}`, session, seq, resync)
}

// subscribeLocked starts the session on the first subscription, answers
// the subscription by channel (with the request's id when it has one), and
// streams to c.
func (f *feed) subscribeLocked(c *upstreamtest.Conn, m request) {
	if f.session == "" {
		f.session = fmt.Sprintf("%08x", f.opts.rng.Uint32())
		f.epoch = f.opts.now()
		_ = c.Send(welcome(f.session, 0, false))
	}
	text := `{"t":"subscribed","channel":` + strconv.Quote(m.Channel)
	if len(m.ID) > 0 {
		text += `,"id":` + string(m.ID)
	}
	_ = c.Send(text + `}`)
	f.streamLocked(c)
}

// resumeLocked answers a resume: a replay of the events after after, or a
// snapshot when the buffer no longer holds after+1. A session the feed does
// not know (it never restarts, so only a confused client sends one) gets
// the current one with a resync.
func (f *feed) resumeLocked(c *upstreamtest.Conn, session string, after int64) {
	if f.session == "" {
		_ = c.Send(ackMessage)
		return
	}
	head := f.stats.published
	oldest := head - int64(len(f.history)) + 1
	switch {
	case session == f.session && after >= oldest-1 && after <= head:
		_ = c.Send(welcome(f.session, after, false))
		for seq := after + 1; seq <= head; seq++ {
			_ = c.Send(f.history[seq-oldest])
			f.stats.replayed++
		}
	default:
		_ = c.Send(welcome(f.session, head, true))
		_ = c.Send(fmt.Sprintf(`{"t":"snapshot","at":%d,"price":%.2f}`, head, f.price))
		f.stats.snapshots++
	}
	f.streamLocked(c)
}

// streamLocked makes c receive events, if it is still the live connection.
func (f *feed) streamLocked(c *upstreamtest.Conn) {
	if f.live == c {
		f.streaming = true
		f.setUp(true)
	}
}

// attach makes c the live connection and closes the ones it supersedes.
func (f *feed) attach(c *upstreamtest.Conn) {
	f.mu.Lock()
	old := f.stale
	if f.live != nil {
		old = append(old, f.live)
	}
	f.live, f.stale, f.streaming = c, nil, false
	f.setUp(false)
	f.mu.Unlock()
	for _, o := range old {
		_ = o.Close()
	}
}

// detach forgets c when it ends while live.
func (f *feed) detach(c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == c {
		f.live, f.streaming = nil, false
		f.setUp(false)
	}
}

// setUp opens or closes the healthy channel; f.mu is held.
func (f *feed) setUp(up bool) {
	select {
	case <-f.up:
		if !up {
			f.up = make(chan struct{})
		}
	default:
		if up {
			close(f.up)
		}
	}
}

// take removes and returns the live connection (nil when none) and applies
// change to the feed's state in the same critical section, so a reconnect
// cannot slip in between.
func (f *feed) take(change func(c *upstreamtest.Conn)) *upstreamtest.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.live
	if c == nil {
		return nil
	}
	f.live, f.streaming = nil, false
	f.setUp(false)
	if change != nil {
		change(c)
	}
	return c
}

// reset aborts the live connection with a TCP RST.
func (f *feed) reset() bool {
	c := f.take(nil)
	if c == nil {
		return false
	}
	_ = c.Reset()
	return true
}

// stall makes the live connection half-open: the feed stops reading,
// writing and answering pings, but keeps TCP open. The next connection is
// served normally and closes this one.
func (f *feed) stall() bool {
	c := f.take(func(c *upstreamtest.Conn) { f.stale = append(f.stale, c) })
	if c == nil {
		return false
	}
	c.IgnorePings(true)
	c.Stall()
	return true
}

// restart closes the live connection with 1012 and answers handshakes with
// 502 for down.
func (f *feed) restart(down time.Duration) bool {
	c := f.take(func(*upstreamtest.Conn) { f.refuseUntil = f.opts.now().Add(down) })
	if c == nil {
		return false
	}
	_ = c.CloseWith(1012, "service restart")
	return true
}

// overload sheds the live connection with 1013 and refuses the next n
// handshakes with 503 and Retry-After: 1.
func (f *feed) overload(n int) bool {
	c := f.take(func(*upstreamtest.Conn) { f.refuseNext = n })
	if c == nil {
		return false
	}
	_ = c.CloseWith(1013, "try again later")
	return true
}

// glitch makes the live connection skip the next drop events and then send
// the repeat events before them again. It reports whether a connection was
// streaming.
func (f *feed) glitch(drop, repeat int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil || !f.streaming {
		return false
	}
	f.hiccup = hiccup{drop: drop, repeat: repeat}
	return true
}

// publish numbers and sends events at the configured rate until ctx ends.
func (f *feed) publish(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(time.Second / time.Duration(f.opts.rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.tick()
		}
	}
}

// tick publishes the events due by now and sends them to the streaming
// connection, if any.
func (f *feed) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	from, to := f.dueLocked()
	for seq := from; seq <= to; seq++ {
		f.price = max(1, f.price+(f.opts.rng.Float64()-0.5)*0.2)
		ev := fmt.Sprintf(`{"t":"event","seq":%d,"price":%.2f}`, seq, f.price)
		f.history = append(f.history, ev)
		if len(f.history) > f.opts.keep {
			f.history = f.history[1:]
		}
		if f.live != nil && f.streaming {
			f.sendLocked(ev)
		}
	}
}

// sendLocked writes a new event to the live connection, applying a hiccup:
// while it drops, events are only kept; once it has dropped its share, the
// events sent just before the drop go out again, then the new one.
func (f *feed) sendLocked(ev string) {
	h := &f.hiccup
	if h.drop > 0 {
		h.drop--
		h.dropped++
		f.stats.dropped++
		return
	}
	if h.repeat > 0 {
		// history ends with the dropped events, then ev; before them are
		// the events sent last.
		end := len(f.history) - 1 - h.dropped
		for i := max(end-h.repeat, 0); i < end; i++ {
			_ = f.live.Send(f.history[i])
			f.stats.repeated++
		}
		*h = hiccup{}
	}
	if f.live.Send(ev) == nil {
		f.stats.delivered++
	}
}

// dueLocked numbers the events due now and returns their range. A ticker
// fires late on a busy machine, so each tick catches up to rate·elapsed,
// at most one second's worth at once: after a longer stall (a suspended
// laptop) the schedule moves on instead of flooding the client. Numbering
// starts with the session, so the client's stream begins at 1.
func (f *feed) dueLocked() (from, to int64) {
	if f.session == "" {
		return 1, 0
	}
	rate := int64(f.opts.rate)
	elapsed := f.opts.now().Sub(f.epoch)
	due := int64(elapsed/time.Millisecond) * rate / 1000
	if behind := due - f.stats.published; behind > rate {
		f.epoch = f.epoch.Add(time.Duration(behind-rate) * time.Second / time.Duration(rate))
		due = f.stats.published + rate
	}
	from = f.stats.published + 1
	f.stats.published = max(f.stats.published, due)
	return from, f.stats.published
}
