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

// The feed's wire protocol.
const (
	helloMessage = `{"t":"hello","server":"demo-feed"}`
	ackMessage   = `{"t":"ack"}`
)

// feedOptions configures a feed.
type feedOptions struct {
	rate int        // events per second
	rng  *rand.Rand // the price walk; used only by the publisher goroutine
	now  func() time.Time
}

// feedStats counts what the feed published.
type feedStats struct {
	published int64 // events numbered
	delivered int64 // events written to a live connection
}

// feed is the demo's upstream: a price feed on upstreamtest.Server that
// greets every connection with a hello and, once the connection has
// subscribed, streams numbered events at a fixed rate from one global
// sequence counter. Like a real feed it forgets subscriptions with the
// connection: a new connection gets nothing until it subscribes again,
// which is what tether's replay log does for the client. Events numbered
// while no subscribed connection is live are never sent: that is what the
// client sees as a gap. It serves one subscriber: a new connection
// supersedes the previous one.
//
// Its fault methods (reset, stall, restart, overload) act on the live
// connection. All methods are safe for concurrent use; mu is never held
// across network I/O.
type feed struct {
	srv    *upstreamtest.Server
	opts   feedOptions
	price  float64 // publisher goroutine only
	cancel context.CancelFunc
	done   chan struct{} // closed when the publisher has returned

	mu          sync.Mutex
	live        *upstreamtest.Conn   // the current connection; nil while down or stalled
	subscribed  bool                 // live has subscribed: it receives events
	stale       []*upstreamtest.Conn // stalled, closed once superseded
	started     bool                 // a connection subscribed: numbering has begun
	epoch       time.Time            // when numbering began (moved on after stalls)
	stats       feedStats
	up          chan struct{} // closed while live streams (has subscribed)
	refuseUntil time.Time     // restart: handshakes answered 502 until then
	refuseNext  int           // overload: refuse this many handshakes with 503
}

// startFeed listens on 127.0.0.1:0 and starts the publisher.
func startFeed(opts feedOptions) (*feed, error) {
	f := &feed{opts: opts, price: 100, done: make(chan struct{}), up: make(chan struct{})}
	srv, err := upstreamtest.NewServer(upstreamtest.Options{
		Handshake: f.handshake,
		OnConn:    f.serveConn,
		Greeting:  helloMessage,
	})
	if err != nil {
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

// Close stops the publisher and the server; it waits for all their
// goroutines and is idempotent.
func (f *feed) Close() {
	f.cancel()
	<-f.done
	_ = f.srv.Close()
}

// Stats returns the publication counters.
func (f *feed) Stats() feedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// healthy returns a channel that is closed while a live connection streams:
// it has subscribed. Faults wait for it, so each one hits a working feed.
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
		text, sub := reply(data)
		if sub {
			f.subscribe(c)
		}
		// A failed write ends the connection; the next Read reports it.
		_ = c.Send(text)
	}
}

// reply answers a client message: a subscription is confirmed by channel,
// with the request's id when it has one; anything else gets a plain ack.
func reply(data []byte) (text string, sub bool) {
	var m struct {
		T       string          `json:"t"`
		Channel string          `json:"channel"`
		ID      json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil || m.T != "sub" {
		return ackMessage, false
	}
	text = `{"t":"subscribed","channel":` + strconv.Quote(m.Channel)
	if len(m.ID) > 0 {
		text += `,"id":` + string(m.ID)
	}
	return text + `}`, true
}

// subscribe starts the events on c, if it is still the live connection.
func (f *feed) subscribe(c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == c {
		f.subscribed = true
		if !f.started {
			f.started, f.epoch = true, f.opts.now()
		}
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
	f.live, f.stale, f.subscribed = c, nil, false
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
		f.live, f.subscribed = nil, false
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
	f.live, f.subscribed = nil, false
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

// tick publishes the events due by now. A ticker fires late on a busy
// machine, so each tick catches up to rate·elapsed, at most one second's
// worth at once: after a longer stall (a suspended laptop) the schedule
// moves on instead of flooding the client.
func (f *feed) tick() {
	from, to, c := f.due()
	for seq := from; seq <= to; seq++ {
		f.price = max(1, f.price+(f.opts.rng.Float64()-0.5)*0.2)
		if c == nil {
			continue
		}
		if c.Send(fmt.Sprintf(`{"t":"event","seq":%d,"price":%.2f}`, seq, f.price)) != nil {
			c = nil // gone: the rest of this batch is lost like any other
			continue
		}
		f.mu.Lock()
		f.stats.delivered++
		f.mu.Unlock()
	}
}

// due numbers the events due now and returns their range and the live
// connection to send them to, nil unless it has subscribed. Numbering
// starts with the first subscription, so the client's stream begins at 1
// and every later hole is a real gap.
func (f *feed) due() (from, to int64, c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started {
		return 1, 0, nil
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
	if !f.subscribed {
		return from, f.stats.published, nil
	}
	return from, f.stats.published, f.live
}
