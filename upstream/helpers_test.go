package upstream_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Configuration shared by the socket tests. Every timing assertion is derived
// from these values.
const (
	pingInterval = 100 * time.Millisecond
	pingTimeout  = 100 * time.Millisecond
	backoffBase  = 20 * time.Millisecond
	backoffCap   = 200 * time.Millisecond
	dialTimeout  = 3 * time.Second

	// waitLimit bounds every wait for something that must happen; on loopback
	// it is only reached when a test fails.
	waitLimit = 5 * time.Second
	// slack is added to upper timing bounds for scheduling on a loaded CI
	// machine running with -race. Lower bounds need none: timers never fire
	// early.
	slack = 2 * time.Second
	// clientLife bounds a Client's context, so a test that fails to close
	// its Client still ends.
	clientLife = 30 * time.Second
	// scheduled is the Client's log message for each backoff wait; its
	// "delay" field is the exact delay chosen (JitterNone in these tests).
	scheduled = "upstream reconnect scheduled"
)

// event is one call the Client made on the test handler.
type event struct {
	gen  uint64
	conn *upstream.Conn
	op   ws.OpCode
	data string
	err  error
	at   time.Time
}

// handler is the test's upstream.Handler. It reports every call on a channel,
// in order, and keeps the messages of each generation. restore and message,
// when set, run inside the Client's calls (to send, block or fail).
type handler struct {
	restore func(ctx context.Context, c *upstream.Conn) error
	message func(c *upstream.Conn, op ws.OpCode, data []byte)

	restores chan event
	messages chan event
	losts    chan event
	quit     chan struct{} // closed at cleanup: reports are dropped from then on
	quitOnce sync.Once

	mu    sync.Mutex
	byGen map[uint64][]string
	order []string // every call, in the order the Client made them
}

func newHandler() *handler {
	return &handler{
		restores: make(chan event, 1024),
		messages: make(chan event, 1024),
		losts:    make(chan event, 1024),
		quit:     make(chan struct{}),
		byGen:    make(map[uint64][]string),
	}
}

func (h *handler) Restore(ctx context.Context, c *upstream.Conn) error {
	h.note(fmt.Sprintf("restore %d", c.Gen()))
	h.report(h.restores, event{gen: c.Gen(), conn: c, at: time.Now()})
	if h.restore != nil {
		return h.restore(ctx, c)
	}
	return nil
}

func (h *handler) Message(c *upstream.Conn, op ws.OpCode, data []byte) {
	ev := event{gen: c.Gen(), conn: c, op: op, data: string(data), at: time.Now()}
	h.mu.Lock()
	h.byGen[ev.gen] = append(h.byGen[ev.gen], ev.data)
	h.order = append(h.order, fmt.Sprintf("message %d", ev.gen))
	h.mu.Unlock()
	// Reported before the hook runs, so a test sees a message its hook then
	// blocks on.
	h.report(h.messages, ev)
	if h.message != nil {
		h.message(c, op, data)
	}
}

// Flush does nothing: the test handler holds no message back
// (flushHandler records its calls).
func (h *handler) Flush(*upstream.Conn) {}

func (h *handler) Lost(c *upstream.Conn, err error) {
	h.note(fmt.Sprintf("lost %d", c.Gen()))
	h.report(h.losts, event{gen: c.Gen(), conn: c, err: err, at: time.Now()})
}

// report never blocks the Client past cleanup, so Close cannot deadlock on a
// test that stopped reading.
func (h *handler) report(ch chan event, ev event) {
	select {
	case ch <- ev:
	case <-h.quit:
	}
}

func (h *handler) stop() { h.quitOnce.Do(func() { close(h.quit) }) }

func (h *handler) note(call string) {
	h.mu.Lock()
	h.order = append(h.order, call)
	h.mu.Unlock()
}

// calls returns every call so far as "restore N", "message N" or "lost N".
func (h *handler) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

func (h *handler) messagesOf(gen uint64) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.byGen[gen]...)
}

func (h *handler) nextRestore(t *testing.T) event {
	t.Helper()
	return recv(t, h.restores, "Restore")
}

func (h *handler) nextMessage(t *testing.T) event {
	t.Helper()
	return recv(t, h.messages, "Message")
}

func (h *handler) nextLost(t *testing.T) event {
	t.Helper()
	return recv(t, h.losts, "Lost")
}

// recv waits up to waitLimit for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, waitLimit)
	}
	var zero T
	return zero
}

// waitClosed waits up to waitLimit for ch to be closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	recv(t, ch, what)
}

// pending reports a value already waiting on ch, without waiting.
func pending[T any](ch <-chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		var zero T
		return zero, false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// newServer starts a scriptable upstream closed at cleanup.
func newServer(t *testing.T, opts upstreamtest.Options) *upstreamtest.Server {
	t.Helper()
	opts.Logf = t.Logf
	s, err := upstreamtest.NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holdOpen is an OnConn that keeps the connection open, sending nothing,
// until the client or the server closes it.
func holdOpen(c *upstreamtest.Conn) { <-c.Context().Done() }

// closePolicy is the default policy of docs/design.md, with the given floors.
func closePolicy(t *testing.T, permanent string, restartFloor, tryAgainFloor time.Duration) upstream.ClosePolicy {
	t.Helper()
	perm, err := upstream.ParseCodeSet(permanent)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", permanent, err)
	}
	reauth, err := upstream.ParseCodeSet(upstream.DefaultReauthCodes)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", upstream.DefaultReauthCodes, err)
	}
	return upstream.ClosePolicy{Permanent: perm, Reauth: reauth, RestartFloor: restartFloor, TryAgainFloor: tryAgainFloor}
}

// testOptions is a Client configuration with the package's test durations, no
// heartbeat, and no confirmation by time (tests that need one set it).
func testOptions(t *testing.T, url string, h *handler) upstream.Options {
	t.Helper()
	return upstream.Options{
		URL:             url,
		DialTimeout:     dialTimeout,
		Backoff:         upstream.Backoff{Jitter: upstream.JitterNone, Base: backoffBase, Cap: backoffCap},
		StableAfter:     time.Hour,
		Close:           closePolicy(t, upstream.DefaultPermanentCodes, time.Second, time.Second),
		AuthFailuresMax: 3,
		Handler:         h,
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel)),
	}
}

// observe makes opts log to the test output and to the returned recorder.
func observe(t *testing.T, opts *upstream.Options) *observer.ObservedLogs {
	core, logs := observer.New(zapcore.DebugLevel)
	test := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel)).Core()
	opts.Logger = zap.New(zapcore.NewTee(test, core))
	return logs
}

// scheduledDelays returns the delay of each backoff wait logged so far.
func scheduledDelays(logs *observer.ObservedLogs) []time.Duration {
	var out []time.Duration
	for _, e := range logs.FilterMessage(scheduled).All() {
		if d, ok := e.ContextMap()["delay"].(time.Duration); ok {
			out = append(out, d)
		}
	}
	return out
}

// startClient creates and starts a Client, closed at cleanup.
func startClient(t *testing.T, opts upstream.Options) *upstream.Client {
	t.Helper()
	return startNew(t, opts, func(*upstream.Client) {})
}

// startNew is startClient, calling before with the new Client before it
// starts: for an Options callback that needs the Client itself.
func startNew(t *testing.T, opts upstream.Options, before func(*upstream.Client)) *upstream.Client {
	t.Helper()
	c, err := upstream.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	before(c)
	ctx, cancel := context.WithTimeout(context.Background(), clientLife)
	c.Start(ctx)
	t.Cleanup(func() {
		if h, ok := opts.Handler.(*handler); ok {
			h.stop()
		}
		c.Close()
		cancel()
	})
	return c
}

// states records a Client's state changes (Options.OnState). The callback
// runs on the Client goroutine and never blocks it.
type states struct{ ch chan upstream.State }

func newStates() *states { return &states{ch: make(chan upstream.State, 4096)} }

func (s *states) record(st upstream.State) {
	select {
	case s.ch <- st:
	default:
	}
}

// waitFor consumes recorded states until want appears.
func (s *states) waitFor(t *testing.T, want upstream.State) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		select {
		case st := <-s.ch:
			if st == want {
				return
			}
		case <-deadline.C:
			t.Fatalf("state %v not reached within %v", want, waitLimit)
		}
	}
}

// handshakeLog records every handshake the server saw: when, and with which
// headers. decide, when set, answers it.
type handshakeLog struct {
	decide func(h upstreamtest.Handshake) (int, http.Header)

	mu        sync.Mutex
	at        []time.Time
	headers   []http.Header
	protocols [][]string
	seen      chan int // the handshake's N, once recorded
}

func newHandshakeLog() *handshakeLog { return &handshakeLog{seen: make(chan int, 1024)} }

// handshake is an upstreamtest.Options.Handshake.
func (l *handshakeLog) handshake(h upstreamtest.Handshake) (int, http.Header) {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	l.headers = append(l.headers, h.Header)
	l.protocols = append(l.protocols, h.Protocols)
	l.mu.Unlock()
	status, header := 0, http.Header(nil)
	if l.decide != nil {
		status, header = l.decide(h)
	}
	select {
	case l.seen <- h.N:
	default:
	}
	return status, header
}

func (l *handshakeLog) times() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at...)
}

func (l *handshakeLog) header(i int) http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.headers[i]
}

func (l *handshakeLog) offered(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.protocols[i]
}

// waitN waits until at least n handshakes were seen.
func (l *handshakeLog) waitN(t *testing.T, n int) {
	t.Helper()
	for {
		if got := recv(t, l.seen, "handshake"); got >= n {
			return
		}
	}
}
