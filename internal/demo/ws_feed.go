package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// The WebSocket feed's protocol and limits.
const (
	ackMessage = `{"t":"ack"}`
	// replayWindow is how much history the feed keeps for resumes and HTTP
	// catch-up, in seconds of events: an outage longer than that (a
	// restart that keeps refusing, an overload) is answered with a snapshot
	// instead of a replay.
	replayWindow = 3
	// hiccupDrop and hiccupRepeat size a hiccup: events the live connection
	// misses, then events it gets a second time.
	hiccupDrop   = 3
	hiccupRepeat = 2

	feedMaxMessage       = 1 << 20 // tether's messages are tiny
	feedHandshakeTimeout = 5 * time.Second
	feedWriteTimeout     = 5 * time.Second
	feedCloseWait        = time.Second
	acceptRetry          = 10 * time.Millisecond // after an accept error such as EMFILE
)

// wsFeedStats counts what the feed published and how each event reached
// tether.
type wsFeedStats struct {
	delivered int64 // events written to a live connection as they were published
	replayed  int64 // events re-sent in answer to a resume
	snapshots int64 // resumes answered with a snapshot: the history no longer reached back
	served    int64 // events served over HTTP catch-up
	dropped   int64 // events a hiccup did not send
	repeated  int64 // events a hiccup sent twice
	// unstreamed counts events published while no connection streamed:
	// those a resume, a snapshot or nothing made up for.
	unstreamed int64
}

// wsFeed is the WebSocket demo's upstream, docs/design.md's worked example
// of a resumable feed: a price feed that numbers its events within a
// session and keeps the last few seconds of them. A connection speaks
// first: a subscription starts the session (answered by a welcome carrying
// the session id, then the subscription's answer), and
// {"t":"resume","session":S,"after":N} on a later connection is answered by
// a welcome and a replay of the events after N, or, when the history no
// longer reaches back to N+1, by a welcome with resync:true and a snapshot.
// A repeated subscription is answered again (with its request id). Events
// published while no connection streams are only kept; the same history is
// served over HTTP at /catchup?from=F&to=T. It serves one subscriber: a new
// connection supersedes the previous one.
//
// Goroutines: the accept loop, one per connection (its reader; wsconn owns
// the writer), the publisher and the catch-up server's. All methods are
// safe for concurrent use. Messages are queued on a connection under mu, so
// a replay and the live events after it cannot interleave; queuing never
// waits on the network.
type wsFeed struct {
	ln      net.Listener
	catchUp *httpServer
	now     func() time.Time
	cancel  context.CancelFunc // ends the publisher and closes every socket
	wg      sync.WaitGroup     // the accept loop, the connections, the publisher
	once    sync.Once

	mu          sync.Mutex
	prices      prices
	live        *feedConn   // the current connection; nil while down or stalled
	streaming   bool        // live has subscribed or resumed: it receives events
	stale       []*feedConn // stalled, closed once superseded
	session     string      // the session id; "" before the first subscription
	stats       wsFeedStats
	up          chan struct{} // closed while live streams
	refuseUntil time.Time     // restart: handshakes answered 502 until then
	refuseNext  int           // overload: refuse this many handshakes with 503
	hiccup      hiccup        // events to drop and repeat on the live connection
}

// feedConn is one upgraded connection.
type feedConn struct {
	ws  *wsconn.Conn
	raw *faultyConn
}

// hiccup is a broker glitch on the live connection: drop events are not
// sent, then the repeat events sent just before them go out again.
type hiccup struct {
	drop, repeat int
	dropped      int // dropped so far
}

// startWSFeed listens on 127.0.0.1:0 (WebSocket and HTTP catch-up) and
// starts the publisher.
func startWSFeed(opts feedOptions) (*wsFeed, error) {
	if opts.keep <= 0 {
		opts.keep = replayWindow * opts.rate
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start feed: %w", err)
	}
	f := &wsFeed{ln: ln, now: opts.now, prices: newPrices(opts.rate, opts.keep, opts.rng), up: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+catchUpPath, f.serveCatchUp)
	if f.catchUp, err = startHTTP(&http.Server{Handler: mux}); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("start feed's catch-up endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	go func() { defer f.wg.Done(); f.acceptLoop(ctx) }()
	go func() { defer f.wg.Done(); publishEvery(ctx, opts.rate, f.tick) }()
	return f, nil
}

// URL is the feed's ws:// address.
func (f *wsFeed) URL() string { return "ws://" + f.ln.Addr().String() + "/" }

// CatchUpURL is the address of the HTTP catch-up endpoint, without query.
func (f *wsFeed) CatchUpURL() string { return f.catchUp.url(catchUpPath) }

// Close stops the publisher and the servers, closes every connection and
// waits for all their goroutines. It is idempotent.
func (f *wsFeed) Close() {
	f.once.Do(func() {
		f.cancel()
		_ = f.ln.Close()
		f.wg.Wait()
		f.catchUp.close()
	})
}

// Stats returns the publication counters.
func (f *wsFeed) Stats() wsFeedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *wsFeed) published() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prices.head
}

func (f *wsFeed) unstreamed() int64 { return f.Stats().unstreamed }

func (f *wsFeed) summary() string { return wsFeedLine(f.published(), f.Stats()) }

// wsFeedLine says how the feed's events reached tether.
func wsFeedLine(published int64, st wsFeedStats) string {
	s := fmt.Sprintf("published %s: %s sent live, %s replayed after resumes, %s served over HTTP",
		plural(published, "event", "events"), fmtCount(st.delivered), fmtCount(st.replayed), fmtCount(st.served))
	if st.dropped+st.repeated > 0 {
		s += fmt.Sprintf("; hiccups dropped %s and repeated %s", fmtCount(st.dropped), fmtCount(st.repeated))
	}
	return s
}

// waitHealthy waits until a live connection streams.
func (f *wsFeed) waitHealthy(ctx context.Context) bool {
	f.mu.Lock()
	up := f.up
	f.mu.Unlock()
	select {
	case <-up:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *wsFeed) acceptLoop(ctx context.Context) {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !wait(ctx, acceptRetry) {
				return
			}
			continue
		}
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.serve(ctx, &faultyConn{Conn: nc, closed: make(chan struct{})}) }()
	}
}

// serve runs one connection, the handshake then its reader, until it ends
// or ctx does.
func (f *wsFeed) serve(ctx context.Context, raw *faultyConn) {
	// A closed socket fails the handshake or the reader, and wsconn then
	// stops its writer.
	defer context.AfterFunc(ctx, func() { _ = raw.Close() })()
	wc, err := f.upgrade(raw)
	if err != nil {
		_ = raw.Close()
		return
	}
	c := &feedConn{ws: wc, raw: raw}
	f.attach(c)
	for {
		_, data, err := wc.ReadMessage()
		if err != nil {
			break
		}
		f.answer(c, data)
	}
	f.detach(c)
	<-wc.Done() // wsconn closes the socket after a read error or the closing handshake
}

// upgrade answers the handshake; refusals are sent by admit.
func (f *wsFeed) upgrade(raw *faultyConn) (*wsconn.Conn, error) {
	_ = raw.SetDeadline(time.Now().Add(feedHandshakeTimeout))
	// tether sends nothing before the 101 answer (RFC 6455 section 4.1), so
	// the upgrader's read buffer holds no frame when it is done.
	if _, err := (ws.Upgrader{OnBeforeUpgrade: f.admit}).Upgrade(raw); err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return wsconn.New(raw, nil, wsconn.Options{
		MaxMessageBytes: feedMaxMessage,
		WriteTimeout:    feedWriteTimeout,
		CloseWait:       feedCloseWait,
	}), nil
}

// admit refuses handshakes while a restart or an overload is in effect.
func (f *wsFeed) admit() (ws.HandshakeHeader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.refuseNext > 0:
		f.refuseNext--
		return nil, ws.RejectConnectionError(ws.RejectionStatus(http.StatusServiceUnavailable),
			ws.RejectionHeader(ws.HandshakeHeaderHTTP(http.Header{"Retry-After": {"1"}})))
	case f.now().Before(f.refuseUntil):
		// What a load balancer answers while the service behind it restarts.
		return nil, ws.RejectConnectionError(ws.RejectionStatus(http.StatusBadGateway))
	}
	return nil, nil
}

// request is what tether sends the feed.
type request struct {
	T       string          `json:"t"`
	Channel string          `json:"channel"`
	ID      json.RawMessage `json:"id"`
	Session string          `json:"session"`
	After   int64           `json:"after"`
}

// answer answers one message from tether.
func (f *wsFeed) answer(c *feedConn, data []byte) {
	var m request
	if json.Unmarshal(data, &m) != nil {
		m = request{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m.T {
	case "resume":
		f.resumeLocked(c, m.Session, m.After)
	case "sub":
		f.subscribeLocked(c, m)
	default:
		c.send(ackMessage)
	}
}

// send queues one message. A connection that failed drops it; its reader
// reports the failure.
func (c *feedConn) send(text string) bool {
	return c.ws.Send(context.Background(), ws.OpText, []byte(text)) == nil
}

func welcome(session string, seq int64, resync bool) string {
	return fmt.Sprintf(`{"t":"welcome","session":%q,"seq":%d,"resync":%t}`, session, seq, resync)
}

// subscribeLocked starts the session on the first subscription, answers
// the subscription by channel (with the request's id when it has one), and
// streams to c.
func (f *wsFeed) subscribeLocked(c *feedConn, m request) {
	if f.session == "" {
		f.session = fmt.Sprintf("%08x", f.prices.rng.Uint32())
		f.prices.start(f.now())
		c.send(welcome(f.session, 0, false))
	}
	text := `{"t":"subscribed","channel":` + strconv.Quote(m.Channel)
	if len(m.ID) > 0 {
		text += `,"id":` + string(m.ID)
	}
	c.send(text + `}`)
	f.streamLocked(c)
}

// resumeLocked answers a resume: a replay of the events after after, or a
// snapshot when the history no longer holds after+1. A session the feed
// does not know (it never restarts, so only a confused client sends one)
// gets the current one with a resync.
func (f *wsFeed) resumeLocked(c *feedConn, session string, after int64) {
	if f.session == "" {
		c.send(ackMessage)
		return
	}
	head := f.prices.head
	if session == f.session && after >= f.prices.oldest()-1 && after <= head {
		c.send(welcome(f.session, after, false))
		for _, ev := range f.prices.events(after+1, head) {
			c.send(ev)
			f.stats.replayed++
		}
	} else {
		c.send(welcome(f.session, head, true))
		c.send(f.prices.snapshot())
		f.stats.snapshots++
	}
	f.streamLocked(c)
}

// streamLocked makes c receive events, if it is still the live connection.
func (f *wsFeed) streamLocked(c *feedConn) {
	if f.live == c {
		f.streaming = true
		f.setUp(true)
	}
}

// attach makes c the live connection and closes the ones it supersedes.
func (f *wsFeed) attach(c *feedConn) {
	f.mu.Lock()
	old := f.stale
	if f.live != nil {
		old = append(old, f.live)
	}
	f.live, f.stale, f.streaming = c, nil, false
	f.setUp(false)
	f.mu.Unlock()
	for _, o := range old {
		o.ws.Abort()
	}
}

// detach forgets c when it ends while live.
func (f *wsFeed) detach(c *feedConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == c {
		f.live, f.streaming = nil, false
		f.setUp(false)
	}
}

// setUp opens or closes the healthy channel; f.mu is held.
func (f *wsFeed) setUp(up bool) {
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

// tick publishes the events due by now and sends them to the streaming
// connection, if any.
func (f *wsFeed) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	from, to := f.prices.publish(f.now())
	if f.live == nil || !f.streaming {
		f.stats.unstreamed += max(to-from+1, 0)
		return
	}
	first := max(from, f.prices.oldest())
	for i, ev := range f.prices.events(from, to) {
		f.sendEventLocked(first+int64(i), ev)
	}
}

// sendEventLocked sends event seq to the live connection, applying a
// hiccup: while it drops, events are only kept; once it has dropped its
// share, the events sent just before the drop go out again, then seq.
func (f *wsFeed) sendEventLocked(seq int64, ev string) {
	h := &f.hiccup
	if h.drop > 0 {
		h.drop--
		h.dropped++
		f.stats.dropped++
		return
	}
	if h.repeat > 0 {
		firstDropped := seq - int64(h.dropped)
		for _, old := range f.prices.events(firstDropped-int64(h.repeat), firstDropped-1) {
			f.live.send(old)
			f.stats.repeated++
		}
		*h = hiccup{}
	}
	if f.live.send(ev) {
		f.stats.delivered++
	}
}

// inject applies one of the feed's faults to the live connection. The
// connection stops being live, and the refusals that follow are armed, in
// the same critical section, so a reconnect cannot slip in between.
//
//   - reset aborts it with a TCP RST;
//   - stall makes it half-open: the feed stops reading, writing and
//     answering pings, but keeps TCP open; the next connection is served
//     normally and closes this one;
//   - restart closes it with 1012 and answers handshakes with 502 for
//     restartDowntime;
//   - overload sheds it with 1013 and refuses the next overloadRefusals
//     handshakes with 503 and Retry-After: 1;
//   - hiccup leaves it up, but it misses the next hiccupDrop events and
//     then gets the hiccupRepeat before them again.
func (f *wsFeed) inject(k faultKind) bool {
	f.mu.Lock()
	c := f.live
	if c == nil || !f.streaming && k == faultHiccup {
		f.mu.Unlock()
		return false
	}
	switch k {
	case faultHiccup:
		f.hiccup = hiccup{drop: hiccupDrop, repeat: hiccupRepeat}
		f.mu.Unlock()
		return true
	case faultStall:
		f.stale = append(f.stale, c)
	case faultRestart:
		f.refuseUntil = f.now().Add(restartDowntime)
	case faultOverload:
		f.refuseNext = overloadRefusals
	}
	f.live, f.streaming = nil, false
	f.setUp(false)
	f.mu.Unlock()
	switch k {
	case faultReset:
		c.raw.lingerZero()
		c.ws.Abort()
	case faultStall:
		c.raw.stalled.Store(true)
	case faultRestart:
		c.ws.Close(1012, "service restart")
	case faultOverload:
		c.ws.Close(1013, "try again later")
	default:
		panic(fmt.Sprintf("demo: the WebSocket feed has no fault of kind %d", k))
	}
	return true
}

// faultyConn is a feed connection's socket, with the faults that act below
// WebSocket: once stalled, every read and write blocks until the socket is
// closed, so the peer sees a connection that is open and silent (not even a
// pong: wsconn answers pings, but its writer never gets the pong out); a
// reset closes it with RST instead of FIN.
type faultyConn struct {
	net.Conn
	stalled atomic.Bool
	closed  chan struct{}
	once    sync.Once
}

func (c *faultyConn) Read(p []byte) (int, error) {
	if c.stalled.Load() {
		return c.block()
	}
	return c.Conn.Read(p)
}

func (c *faultyConn) Write(p []byte) (int, error) {
	if c.stalled.Load() {
		return c.block()
	}
	return c.Conn.Write(p)
}

func (c *faultyConn) block() (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *faultyConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// lingerZero makes the next Close send RST instead of FIN.
func (c *faultyConn) lingerZero() {
	if tcp, ok := c.Conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
}
