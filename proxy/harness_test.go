package proxy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// testTimeout bounds waits for things that should happen promptly on
// loopback; it is only reached when a test fails.
const testTimeout = 5 * time.Second

// The configuration every test starts from: short enough that failures are
// detected and repaired in a fraction of a second. pingTimeout is longer
// than the interval: the test upstream runs in the test's own process, so
// a pong is late whenever that process is starved, and on a loaded 2-core
// machine under -race three goroutines (tether's writer and reader, the
// server's reader) took more than 100 ms to carry one often enough to end
// healthy connections in tests about something else.
const (
	pingInterval = 100 * time.Millisecond
	pingTimeout  = 300 * time.Millisecond
	backoffBase  = 20 * time.Millisecond
	backoffCap   = 200 * time.Millisecond
	dialTimeout  = time.Second
	acceptWait   = 500 * time.Millisecond
	restartFloor = 300 * time.Millisecond
	stableAfter  = 50 * time.Millisecond
	// slack is added to upper timing bounds derived from the configuration:
	// timer and scheduling delays under -race on a loaded machine. On a
	// 2-core machine at load 20-28 (CPU pressure near 100%), a chain of a
	// few goroutines and sockets now and then took 320-360 ms more than
	// the configuration allows (an accept after AcceptWait, a beat after
	// its interval, a session end after its linger), past the 250 ms this
	// was.
	slack = 500 * time.Millisecond
)

// ---- the upstream ----

// upstreamEnv is a scriptable upstream server plus what it observed.
type upstreamEnv struct {
	srv        *upstreamtest.Server
	fromApp    chan upMsg         // messages the server read, from every connection
	handshakes chan handshakeInfo // every handshake request, refused ones included
	ended      chan struct{}      // closed when the test ends, before the server closes
}

type upMsg struct {
	conn int
	op   ws.OpCode
	data string
}

type handshakeInfo struct {
	n         int
	at        time.Time
	protocols []string // offered by tether
}

type upstreamConfig struct {
	// refuse answers handshake n with an HTTP status (0 accepts).
	refuse func(n int) (status int, header http.Header)
	// onConn scripts a connection; nil records what the app sends.
	onConn       func(u *upstreamEnv, c *upstreamtest.Conn)
	subprotocols []string
	// choose, when set, picks the subprotocol handshake n answers with from
	// what tether offered, "" for none: any value, offered or not, as a
	// broken upstream might (subprotocols must then be empty).
	choose   func(n int, offered []string) string
	greeting string // sent with the 101 response
	quiet    bool   // no per-connection log lines (many sessions)
}

func newUpstream(t *testing.T, cfg upstreamConfig) *upstreamEnv {
	t.Helper()
	u := &upstreamEnv{
		fromApp:    make(chan upMsg, 1<<12),
		handshakes: make(chan handshakeInfo, 1<<10),
		ended:      make(chan struct{}),
	}
	onConn := cfg.onConn
	if onConn == nil {
		onConn = (*upstreamEnv).record
	}
	opts := upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			select {
			case u.handshakes <- handshakeInfo{n: h.N, at: time.Now(), protocols: h.Protocols}:
			default:
			}
			var status int
			var header http.Header
			if cfg.refuse != nil {
				status, header = cfg.refuse(h.N)
			}
			if cfg.choose != nil && status == 0 {
				if p := cfg.choose(h.N, h.Protocols); p != "" {
					header = header.Clone()
					if header == nil {
						header = http.Header{}
					}
					header.Set("Sec-Websocket-Protocol", p)
				}
			}
			return status, header
		},
		OnConn:       func(c *upstreamtest.Conn) { onConn(u, c) },
		Subprotocols: cfg.subprotocols,
		Greeting:     cfg.greeting,
	}
	if !cfg.quiet {
		opts.Logf = t.Logf
	}
	srv, err := upstreamtest.NewServer(opts)
	if err != nil {
		t.Fatalf("upstreamtest.NewServer: %v", err)
	}
	u.srv = srv
	t.Cleanup(func() {
		close(u.ended)
		_ = srv.Close()
	})
	return u
}

// record is the default script: hand every message the app sends to the
// test. Every message read is handed over, also once the connection has
// ended: Read returns what arrived before the end first, and a message the
// app sent just before it closed is still news to the test. Only the test's
// end stops a hand-over that waits for room in fromApp (the server's Close
// waits for this script).
func (u *upstreamEnv) record(c *upstreamtest.Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		select {
		case u.fromApp <- upMsg{conn: c.N(), op: op, data: string(data)}:
		case <-u.ended:
			return
		}
	}
}

// nextConn returns the next upstream connection tether opened.
func (u *upstreamEnv) nextConn(t *testing.T) *upstreamtest.Conn {
	t.Helper()
	select {
	case c := <-u.srv.Conns():
		return c
	case <-time.After(testTimeout):
		t.Fatalf("tether opened no upstream connection within %v", testTimeout)
		return nil
	}
}

// expectFromApp fails unless the next message the server read is op/data on
// connection conn.
func (u *upstreamEnv) expectFromApp(t *testing.T, conn int, op ws.OpCode, data string) {
	t.Helper()
	select {
	case m := <-u.fromApp:
		if m.conn != conn || m.op != op || m.data != data {
			t.Fatalf("upstream read %v %q on connection %d, want %v %q on connection %d",
				m.op, m.data, m.conn, op, data, conn)
		}
	case <-time.After(testTimeout):
		t.Fatalf("upstream did not receive %q within %v", data, testTimeout)
	}
}

// expectNothingFromApp fails if the server has read a message it should not
// have. Called after a round trip that orders it after everything the app sent.
func (u *upstreamEnv) expectNothingFromApp(t *testing.T) {
	t.Helper()
	select {
	case m := <-u.fromApp:
		t.Fatalf("upstream read unexpected %v %q on connection %d", m.op, m.data, m.conn)
	default:
	}
}

// handshake returns handshake request n.
func (u *upstreamEnv) handshake(t *testing.T, n int) handshakeInfo {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case h := <-u.handshakes:
			if h.n == n {
				return h
			}
		case <-deadline:
			t.Fatalf("no handshake %d within %v", n, testTimeout)
		}
	}
}

func newFaultProxy(t *testing.T, target string) *upstreamtest.FaultProxy {
	t.Helper()
	fp, err := upstreamtest.NewFaultProxy(target)
	if err != nil {
		t.Fatalf("upstreamtest.NewFaultProxy: %v", err)
	}
	t.Cleanup(func() { _ = fp.Close() })
	return fp
}

// ---- tether ----

// tetherEnv is a proxy.Server serving on a loopback listener.
type tetherEnv struct {
	srv    *proxy.Server
	url    string
	states *stateRecorder
}

func mustCodes(t *testing.T, s string) upstream.CodeSet {
	t.Helper()
	cs, err := upstream.ParseCodeSet(s)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", s, err)
	}
	return cs
}

// baseOptions is the configuration of the brief: small durations, small caps.
func baseOptions(t *testing.T, upstreamURL string, states *stateRecorder) proxy.Options {
	return proxy.Options{
		Upstream: upstream.Options{
			URL:         upstreamURL,
			DialTimeout: dialTimeout,
			Backoff:     upstream.Backoff{Jitter: upstream.JitterFull, Base: backoffBase, Cap: backoffCap},
			StableAfter: stableAfter,
			Close: upstream.ClosePolicy{
				Permanent:     mustCodes(t, upstream.DefaultPermanentCodes),
				Reauth:        mustCodes(t, upstream.DefaultReauthCodes),
				RestartFloor:  restartFloor,
				TryAgainFloor: restartFloor,
			},
			AuthFailuresMax: 3,
			PingInterval:    pingInterval,
			PingTimeout:     pingTimeout,
			MaxMessageBytes: 1 << 20,
			OnState:         states.record,
		},
		AcceptWait:            acceptWait,
		OutboxMaxMessages:     64,
		OutboxMaxBytes:        1 << 20,
		OutboxOverflow:        buffer.OverflowClose,
		MaxSessions:           16,
		MaxMessageBytes:       1 << 20,
		DownstreamBufferBytes: 1 << 20,
		// Not what the tests are about (those that are set their own): at
		// load 19 an app's handshake once outlasted the 2 s this was.
		HandshakeTimeout: testTimeout,
		Logger:           zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)),
		Budget:           testBudget(t),
	}
}

// testBudget is a memory budget, as tether always runs with, roomy enough
// that no test but those about it fills it: what the sessions queue is
// counted on it, so a leak in that count would show as a pause.
func testBudget(t *testing.T) *budget.Budget {
	b, err := budget.New(budget.Options{Limit: 256 << 20, Share: 64 << 10, Sessions: 64})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTether starts a proxy.Server in front of upstreamURL; mutate adjusts the
// base options. Cleanup shuts it down and checks that Serve returned cleanly.
func newTether(t *testing.T, upstreamURL string, mutate func(*proxy.Options)) *tetherEnv {
	t.Helper()
	return newTetherOn(t, upstreamURL, mutate, nil)
}

// newTetherOn is newTether with the listener wrapped by wrapLn, when not
// nil.
func newTetherOn(t *testing.T, upstreamURL string, mutate func(*proxy.Options),
	wrapLn func(net.Listener) net.Listener) *tetherEnv {
	t.Helper()
	states := newStateRecorder()
	opts := baseOptions(t, upstreamURL, states)
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
	url := "ws://" + ln.Addr().String() + "/"
	if wrapLn != nil {
		ln = wrapLn(ln)
	}
	t.Cleanup(serve(t, srv, ln))
	return &tetherEnv{srv: srv, url: url, states: states}
}

// serve runs srv on ln and returns what stops it: a Shutdown bounded by
// testTimeout, then Serve's return, each checked.
func serve(t *testing.T, srv *proxy.Server, ln net.Listener) (stop func()) {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx, 0); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

// noHeartbeat turns dead-connection detection off, for tests about something
// else whose upstream lags on purpose (a backlog, added latency, a hundred
// sessions on a busy machine): a ping stuck behind a backlog would otherwise
// be read as a dead connection and add a reconnection the test did not ask for.
func noHeartbeat(o *proxy.Options) {
	o.Upstream.PingInterval = 0
}

// quietLogger keeps tests with many sessions from drowning the output.
func quietLogger(t *testing.T) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel))
}

// expectSessions waits until the server counts n sessions. Sessions are
// registered and freed by tether's goroutines with no event to wait on, so
// this polls, bounded by testTimeout.
func (e *tetherEnv) expectSessions(t *testing.T, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("Sessions() == %d", n), func() bool { return e.srv.Sessions() == n })
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, testTimeout)
		}
	}
}

// awaitAppQueued waits until the server's one session holds at least n
// bytes queued towards its app: the moment the back-pressure of an app that
// reads nothing reaches tether's buffer. Before it, what the upstream sends
// fills kernel socket buffers first: tether's send buffer towards the app
// (which grows to net.ipv4.tcp_wmem's maximum, 4 MiB here, unless the test
// fixes it with sendBufferListener) and the app's receive buffer. That can
// be megabytes, which takes seconds under -race on a loaded machine: a
// test that samples the queue at a fixed instant finds it empty, and one
// bounded by a fixed time fails while the queue still grows (at load 30,
// 800 KB of the 1 MiB after 5 s). Nothing signals the moment, so this
// polls, and fails once the queue has not grown for testTimeout.
func awaitAppQueued(t *testing.T, srv *proxy.Server, n int64) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	stalled := time.NewTimer(testTimeout)
	defer stalled.Stop()
	var most int64
	for {
		q := srv.AppQueuedBytes()
		if len(q) == 1 && q[0] >= n {
			return
		}
		if len(q) == 1 && q[0] > most {
			most = q[0]
			stalled.Reset(testTimeout)
		}
		select {
		case <-tick.C:
		case <-stalled.C:
			t.Fatalf("bytes queued towards the paused app: %v, at most %d, not growing for %v; want one session with at least %d",
				q, most, testTimeout, n)
		}
	}
}

// ---- upstream client states ----

// stateRecorder collects the upstream client's state changes (a single
// session's; with several sessions they interleave). record never blocks the
// client goroutine that calls it.
type stateRecorder struct {
	ch chan stateEvent
}

type stateEvent struct {
	state upstream.State
	at    time.Time
}

func newStateRecorder() *stateRecorder {
	return &stateRecorder{ch: make(chan stateEvent, 1<<12)}
}

func (r *stateRecorder) record(s upstream.State) {
	select {
	case r.ch <- stateEvent{state: s, at: time.Now()}:
	default:
	}
}

// await returns when the client next enters want.
func (r *stateRecorder) await(t *testing.T, want upstream.State) time.Time {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case ev := <-r.ch:
			if ev.state == want {
				return ev.at
			}
		case <-deadline:
			t.Fatalf("upstream client not %v within %v", want, testTimeout)
		}
	}
}

// expectNone fails if the client enters state within d. It has to watch for
// the whole of d: the point is that nothing happens.
func (r *stateRecorder) expectNone(t *testing.T, state upstream.State, d time.Duration) {
	t.Helper()
	end := time.After(d)
	for {
		select {
		case ev := <-r.ch:
			if ev.state == state {
				t.Fatalf("upstream client entered %v during the quiet period", state)
			}
		case <-end:
			return
		}
	}
}

// ---- the numbered feed ----

// feedMsg is message i of the feed on upstream connection conn.
func feedMsg(conn, i int) string { return strconv.Itoa(conn) + ":" + strconv.Itoa(i) }

func parseFeed(s string) (conn, i int, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	conn, err1 := strconv.Atoi(a)
	i, err2 := strconv.Atoi(b)
	return conn, i, err1 == nil && err2 == nil
}

// feed streams numbered messages from the upstream on its own goroutine.
type feed struct {
	sent chan int // how many Sends succeeded, once the feed ended
}

// startFeed sends n numbered messages on c, stopping at the first failed Send
// (the connection was killed). Cleanup closes c, which unblocks a Send stuck
// on a blackholed socket, and waits for the goroutine.
func startFeed(t *testing.T, c *upstreamtest.Conn, n int) *feed {
	f := &feed{sent: make(chan int, 1)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		i := 0
		for ; i < n; i++ {
			if c.Send(feedMsg(c.N(), i)) != nil {
				break
			}
		}
		f.sent <- i
	}()
	t.Cleanup(func() {
		_ = c.Close()
		wg.Wait()
	})
	return f
}

// count waits for the feed to end and returns how many messages it sent.
func (f *feed) count(t *testing.T) int {
	t.Helper()
	select {
	case n := <-f.sent:
		f.sent <- n
		return n
	case <-time.After(testTimeout):
		t.Fatalf("feed still sending after %v", testTimeout)
		return 0
	}
}

// feedCheck validates the stream the app receives: single-frame text
// messages, connections in order (nothing from a superseded connection after
// a newer one), and from each connection a gap-free, duplicate-free run
// starting at 0.
type feedCheck struct {
	got  map[int]int // connection → messages received
	last int         // newest connection seen
}

func newFeedCheck() *feedCheck { return &feedCheck{got: map[int]int{}} }

func (f *feedCheck) take(t *testing.T, a *app) (conn, i int) {
	t.Helper()
	m := a.next(t)
	conn, i, ok := parseFeed(string(m.data))
	switch {
	case !ok || m.op != ws.OpText:
		t.Fatalf("app got %v %q, want a feed message", m.op, m.data)
	case m.frames != 1:
		t.Fatalf("feed message %q reached the app in %d frames, want 1", m.data, m.frames)
	case conn < f.last:
		t.Fatalf("app got %q from connection %d after messages from connection %d", m.data, conn, f.last)
	case i != f.got[conn]:
		t.Fatalf("app got %q, want %q: gap or duplicate", m.data, feedMsg(conn, f.got[conn]))
	}
	f.last = conn
	f.got[conn]++
	return conn, i
}

// takeUntil consumes the app's messages until it has n from connection conn.
func (f *feedCheck) takeUntil(t *testing.T, a *app, conn, n int) {
	t.Helper()
	for f.got[conn] < n {
		f.take(t, a)
	}
}
