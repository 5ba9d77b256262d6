package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/proxydial"
	"go.uber.org/zap"
)

// Handler is how a Client's owner takes part in each connection. Its methods are
// called from the Client's goroutines and must honour the contexts they get.
type Handler interface {
	// Restore runs once per new connection, in its own goroutine, before the
	// connection counts as restored: send what the server must see first
	// (credentials, subscriptions, queued messages). An error fails the attempt:
	// the connection is closed and the Client backs off. ctx ends when the
	// connection does, or when Restore has returned.
	Restore(ctx context.Context, c *Conn) error
	// Message is called from the connection's reader for every data message
	// tether does not consume itself (heartbeat replies). data is valid only
	// during the call. Blocking applies backpressure to the upstream socket.
	Message(c *Conn, op ws.OpCode, data []byte)
	// Flush is called from the connection's reader before any read that may
	// wait for the socket, and before it stops: a Handler that holds back
	// what Message gave it while more messages wait in the read buffer, to
	// pass them on together, passes them on now, so nothing is held back
	// while tether waits. Like Message, it may block: that is backpressure
	// too. A Handler that holds nothing back does nothing.
	Flush(c *Conn)
	// Lost is called from the Client's goroutine when connection c ends, before
	// the next attempt. err says why.
	Lost(c *Conn, err error)
}

// Options configures a Client. Durations and counts follow the TETHER_*
// variables of the same names (docs/design.md "Variables").
type Options struct {
	URL       string    // ws:// or wss:// for KindWebSocket, http:// or https:// for KindSSE
	Kind      Kind      // the upstream's protocol; default KindWebSocket
	SSEFormat SSEFormat // KindSSE: what each event becomes; default SSEJSON
	// LastEventID, for KindSSE, is the Last-Event-ID of the first request:
	// the stream resumes after it, as an EventSource's does after a
	// reconnect (an sse:// app that read the upstream directly before).
	// Ignored for KindWebSocket.
	LastEventID string
	Header      http.Header // static request headers (no Host, no Sec-WebSocket-*)
	TokenFile   string      // bearer token, re-read on every dial; "" for none
	TLSConfig   *tls.Config // nil: system roots
	// Resolver resolves the upstream's host name, anew on every dial (a
	// name whose address changes is followed); nil is Go's default
	// resolver. Tests set one they control.
	Resolver  *net.Resolver
	Protocols []string // subprotocols offered (the app's); KindWebSocket only
	// Proxy chooses the HTTP proxy of each dial (a CONNECT tunnel for a
	// WebSocket upstream, net/http's proxying for SSE); nil dials directly.
	// Credentials in the proxy URL's userinfo are sent as
	// Proxy-Authorization: Basic.
	Proxy ProxyFunc
	// Compression offers permessage-deflate to a WebSocket upstream
	// (default CompressionAuto); decompression is bounded by
	// MaxMessageBytes. Ignored for KindSSE.
	Compression Compression

	DialTimeout      time.Duration
	Backoff          Backoff
	StableAfter      time.Duration     // confirm after this long open, when Confirm is nil
	Confirm          func([]byte) bool // a message that proves the server is serving
	Close            ClosePolicy       // close-code classes and floors
	MaxAttempts      int               // consecutive failures before giving up; 0 = never
	AuthFailuresMax  int               // consecutive 401/403 answers before giving up
	PingInterval     time.Duration     // inbound silence before a probe; 0 disables
	PingTimeout      time.Duration     // wait for any frame after a probe (SSE: for any bytes; there is no probe)
	HeartbeatMessage []byte            // probe with this text message instead of a ping; KindWebSocket only
	HeartbeatReply   func([]byte) bool // replies that count as liveness and are not forwarded
	// HeartbeatAfterLogin holds HeartbeatMessage back on each connection
	// until Conn.LoggedIn: the probes before are WebSocket pings, so the
	// heartbeat never reaches a server before the login it wants first.
	HeartbeatAfterLogin bool
	// Resume, when set, is how the Client learns that the machine woke from
	// sleep: it then probes its connection at once, and the connection is
	// dead unless something arrives within PingTimeout. Needs the heartbeat
	// (PingInterval > 0). One Resumes serves every Client.
	Resume *Resumes
	// Stopped, when set, is called from the Client goroutine once the
	// Client has stopped for good, with what Err will report (nil after
	// Close or the end of Start's context), before Done is closed and so
	// before Close returns. An owner reacts to the Client giving up there
	// instead of keeping a goroutine waiting on Done.
	Stopped func(err error)
	// Account, when not nil, is the memory budget's account of the
	// Client's session (internal/budget): each connection's write queue
	// and the message it is reassembling count on it (wsconn.Options.
	// Account), and what a lost connection never wrote goes back to it when
	// that connection ends. Ignored for KindSSE.
	Account         *budget.Account
	MaxMessageBytes int64            // both directions (SSE: one event's data, one line); 0: wsconn's default
	QueueBytes      int64            // write queue bound; 0: wsconn's default
	Handler         Handler          // required
	Logger          *zap.Logger      // nil: no logs
	OnState         func(State)      // optional, called from the Client goroutine
	Observer        Observer         // optional: dials, losses, confirmations (metrics)
	now             func() time.Time // tests
}

// DialResult is the outcome of a Client's first dial, which decides how the app's
// handshake is answered (docs/design.md "Sessions").
type DialResult struct {
	Protocol  string // subprotocol chosen by the upstream, when connected
	Err       error  // nil when connected
	Permanent bool   // the failure cannot be fixed by retrying
}

// Client keeps one logical upstream stream alive across connections. Create it
// with New, start it with Start, stop it with Close.
type Client struct {
	opts *Options // shared with other Clients (Shared): read only
	sess Session
	log  *zap.Logger

	first chan DialResult // receives the first dial's outcome, once
	// done is closed when the Client has stopped for good (Done). It is
	// made on first use, under status.mu, and is closedChan once closed:
	// most owners ask for it only in Close, after the end.
	done chan struct{}
	stop context.CancelFunc
	once sync.Once

	state  atomic.Int32
	pinned atomic.Pointer[[]string] // set by PinProtocol
	err    error                    // why run stopped; written before done is closed

	// ctx bounds the Client's life, for the goroutines its connections'
	// events start (run); set by Start.
	ctx context.Context
	// watching is the open connection whose events the state machine
	// waits for; nil while it dials, waits or has stopped.
	watching atomic.Pointer[connWatch]

	// Owned by the goroutine driving the state machine (run).
	gen          uint64
	failures     int // consecutive failed attempts since the last confirmation
	authFailures int // consecutive 401/403 answers
	lastDelay    time.Duration
	lostAt       time.Time // when the last confirmed connection was lost

	// SSE only. http is created by New; the rest is owned by the run
	// goroutine and carried from one event stream to the next, as an
	// EventSource carries them.
	http        *http.Client
	lastEventID string        // sent as Last-Event-ID; "" sends none
	retryFloor  time.Duration // the latest "retry" value, capped; 0 before one

	status statusBoard // what Status reports (status.go)
}

// New checks opts and returns a Client that has not started yet.
func New(opts Options) (*Client, error) {
	sh, err := Share(opts)
	if err != nil {
		return nil, err
	}
	return sh.New(Session{URL: opts.URL, LastEventID: opts.LastEventID, Protocols: opts.Protocols,
		Handler: opts.Handler, Account: opts.Account, Logger: opts.Logger, Stopped: opts.Stopped})
}

// Shared is Options checked and completed once for the Clients of many
// sessions (a proxy's), which point to it instead of each holding a copy
// (416 bytes of every idle session); what differs between them is their
// Session. Safe for concurrent use: nothing changes it.
type Shared struct{ opts Options }

// Session is what a Client of a Shared has of its own: the fields of
// Options of the same names.
type Session struct {
	URL         string // "": the Options' URL
	LastEventID string
	Protocols   []string
	Handler     Handler // required
	Account     *budget.Account
	Logger      *zap.Logger
	Stopped     func(err error)
	// Cancel, when set, ends the context Start is given, which is then the
	// Client's own: Close calls it, and the Client derives no context of
	// its own to end. An owner whose context ends with the Client anyway
	// (a proxy session's) saves the Client that context, its done channel
	// and the map of its children (about 460 bytes).
	Cancel context.CancelFunc
}

// Share checks opts for Shared.New. Of the fields Session has, it keeps
// only URL, the one of a Session that sets none.
func Share(opts Options) (*Shared, error) {
	if opts.URL == "" {
		return nil, errors.New("upstream: URL is required")
	}
	if err := checkKind(opts); err != nil {
		return nil, err
	}
	if opts.AuthFailuresMax < 1 {
		opts.AuthFailuresMax = 1
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	// A Client reads these from its Session: cleared, so nothing reads a
	// session's by mistake.
	opts.LastEventID, opts.Protocols, opts.Handler = "", nil, nil
	opts.Account, opts.Logger, opts.Stopped = nil, nil, nil
	return &Shared{opts: opts}, nil
}

// New returns a Client of sess that has not started yet.
func (sh *Shared) New(sess Session) (*Client, error) {
	if sess.Handler == nil {
		return nil, errors.New("upstream: Handler is required")
	}
	if sess.URL == "" {
		sess.URL = sh.opts.URL
	}
	log := sess.Logger
	if log == nil {
		log = zap.NewNop()
	}
	c := &Client{
		opts:  &sh.opts,
		sess:  sess,
		log:   log,
		first: make(chan DialResult, 1),
	}
	if sh.opts.Kind == KindSSE {
		c.lastEventID = sess.LastEventID
		c.http = newHTTPClient(sh.opts)
	}
	return c, nil
}

// checkKind refuses a Kind or SSEFormat out of range, and options an SSE
// upstream cannot honour.
func checkKind(opts Options) error {
	switch {
	case opts.Kind != KindWebSocket && opts.Kind != KindSSE:
		return fmt.Errorf("upstream: unknown %v", opts.Kind)
	case opts.SSEFormat != SSEJSON && opts.SSEFormat != SSEData:
		return fmt.Errorf("upstream: unknown %v", opts.SSEFormat)
	case opts.Kind == KindSSE && len(opts.HeartbeatMessage) > 0:
		return errors.New("upstream: HeartbeatMessage needs a WebSocket upstream: an SSE upstream takes no messages")
	}
	return nil
}

// PinProtocol makes every later dial offer only protocol p. The proxy calls it
// when it had to accept the app before the upstream answered: the app was told
// p, so the upstream must not pick another one. A dial already in flight keeps
// the offer it was made with; a connection it opens with another subprotocol
// fails with a *SubprotocolError and is not used.
//
// Without a call, the first connection's subprotocol (none included) is
// pinned: it is the one the app was accepted with.
func (c *Client) PinProtocol(p string) {
	c.pinned.Store(pinOf(p))
}

// pinOf is the offer of a pinned subprotocol: p alone, or nothing for none.
func pinOf(p string) *[]string {
	if p == "" {
		return &[]string{}
	}
	return &[]string{p}
}

// checkProtocol fails a connection whose subprotocol got is not the pinned
// one. offered is what its dial offered: a dial that offered only the pinned
// protocol and got another answer met an upstream that does not speak it,
// which is permanent. The first connection of an unpinned Client pins got.
func (c *Client) checkProtocol(offered []string, got string) error {
	pin := c.pinned.Load()
	if pin == nil && c.pinned.CompareAndSwap(nil, pinOf(got)) {
		return nil
	}
	pin = c.pinned.Load()
	want := ""
	if len(*pin) > 0 {
		want = (*pin)[0]
	}
	if got == want {
		return nil
	}
	return &SubprotocolError{Want: want, Got: got, Permanent: slices.Equal(offered, *pin)}
}

// offered is the subprotocol list the next dial offers.
func (c *Client) offered() []string {
	if p := c.pinned.Load(); p != nil {
		return *p
	}
	return c.sess.Protocols
}

// Start launches the Client's goroutine. ctx bounds its whole life; with
// Session.Cancel, Close ends it.
func (c *Client) Start(ctx context.Context) {
	if c.stop = c.sess.Cancel; c.stop == nil {
		ctx, c.stop = context.WithCancel(ctx)
	}
	c.ctx = ctx
	context.AfterFunc(ctx, c.interrupt)
	go c.run(ctx, nil)
}

// First delivers the outcome of the first dial attempt, once.
func (c *Client) First() <-chan DialResult { return c.first }

// Done is closed when the Client has stopped for good; Err then says why.
func (c *Client) Done() <-chan struct{} {
	c.status.mu.Lock()
	defer c.status.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

// closedChan is a closed channel: done, once the Client has stopped.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Err is nil while running and after Close; otherwise the reason the Client gave
// up: a *CloseError with a permanent code, or an error wrapping ErrAuthFailed,
// ErrGaveUp or ErrPermanent.
func (c *Client) Err() error {
	c.status.mu.Lock()
	over := c.done == closedChan
	c.status.mu.Unlock()
	if !over {
		return nil
	}
	return c.err
}

// State reports the current state.
func (c *Client) State() State { return State(c.state.Load()) }

// Close closes the live connection with 1000, interrupts any backoff wait or dial
// at once, and waits for the Client's goroutines. It is idempotent.
func (c *Client) Close() {
	c.once.Do(func() {
		if c.stop != nil {
			c.stop()
		}
	})
	if c.stop != nil {
		<-c.Done()
	}
}

func (c *Client) setState(s State) {
	c.state.Store(int32(s))
	c.noteState(s)
	if c.opts.OnState != nil {
		c.opts.OnState(s)
	}
}

// run is the state machine: dial, serve, classify the end, wait, again.
// It goes on with connection w, or dials first when w is nil.
//
// Its goroutine drives the state machine until a connection is open and
// nothing of it is pending, and exits then (connWatch.serve): the
// connection's next event starts run again on a goroutine of its own, with
// that connection. So an idle connection keeps no goroutine of the Client's
// parked, nor its stack, which a dial, TLS and log lines grow past the
// first 2 KiB and which never shrinks back while its goroutine parks. The
// state machine is still one goroutine at a time (connWatch).
func (c *Client) run(ctx context.Context, w *connWatch) {
	for {
		if w == nil {
			var more bool
			if w, more = c.open(ctx); w == nil {
				if !more {
					c.stopped()
					return
				}
				continue
			}
		}
		err := w.serve(ctx)
		if err == nil {
			return // idle: w's next event goes on
		}
		if !c.lost(ctx, w, err) {
			c.stopped()
			return
		}
		w = nil
	}
}

// interrupt reports the end of the Client's context to the connection it
// watches, whose state machine may have no goroutine to see it. While no
// connection is watched, the goroutine driving the state machine sees the
// end itself: the dial and the backoff wait watch ctx, and serve looks at
// it before it lets go.
func (c *Client) interrupt() {
	if w := c.watching.Load(); w != nil {
		w.report(evStop)
	}
}

// stopped is run's last act: the Client has stopped for good.
func (c *Client) stopped() {
	c.closeIdle()
	c.setState(StateClosed)
	if c.sess.Stopped != nil {
		c.sess.Stopped(c.err)
	}
	c.status.mu.Lock()
	if c.done != nil {
		close(c.done)
	}
	c.done = closedChan
	c.status.mu.Unlock()
}

// open dials once and starts watching the connection. It returns the
// watch, or nil when the dial failed, with whether run goes on.
func (c *Client) open(ctx context.Context) (*connWatch, bool) {
	c.setState(StateConnecting)
	c.gen++
	conn, err := c.dial(ctx, c.gen)
	c.reportFirst(conn, err)
	if err == nil || ctx.Err() == nil {
		c.opts.Observer.Dialed(dialResult(err))
	}
	if err != nil {
		return nil, ctx.Err() == nil && c.retry(ctx, err)
	}
	c.authFailures = 0
	return c.startWatch(ctx, conn), true
}

// lost ends the connection w watched, which err ended, and reports whether
// run dials again.
func (c *Client) lost(ctx context.Context, w *connWatch, err error) bool {
	err = c.endWatch(ctx, w, err)
	c.keepStreamState(w.conn)
	return ctx.Err() == nil && c.retry(ctx, err)
}

// retry applies the policy to why a dial or a connection failed, and waits
// the backoff delay. It reports whether run dials again.
func (c *Client) retry(ctx context.Context, err error) bool {
	c.noteEnd(err)
	floor, stop := c.classify(err)
	if stop != nil {
		c.err = stop
		c.log.Error("upstream failed permanently", zap.Error(stop))
		return false
	}
	return c.wait(ctx, err, max(floor, c.retryFloor))
}

func (c *Client) reportFirst(conn *Conn, err error) {
	if c.gen != 1 {
		return
	}
	r := DialResult{Err: err, Permanent: err != nil && isPermanentDialError(err)}
	if conn != nil {
		r.Protocol = conn.protocol
	}
	c.first <- r
}

// classify applies the close-code and HTTP-status policy to why a connection or
// dial ended. It returns the minimum delay the server asked for, or the error to
// stop with.
func (c *Client) classify(err error) (floor time.Duration, stop error) {
	var ce *CloseError
	var se *StatusError
	var pe *proxydial.Error
	switch {
	case errors.As(err, &pe):
		if pe.RejectsCredentials() && c.authFailed() {
			return 0, &proxyAuthFailed{err: pe}
		}
		return 0, nil // a proxy down or refusing is transient
	case errors.As(err, &ce):
		action, floor := c.opts.Close.Classify(ce.Code)
		if action == ActionStop {
			return 0, ce
		}
		return floor, nil
	case errors.As(err, &se):
		return c.classifyStatus(se)
	case errors.Is(err, ErrPermanent):
		return 0, err // says so itself (an SSE 204, a response that is no event stream)
	case isPermanentDialError(err):
		return 0, fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return 0, nil
}

func (c *Client) classifyStatus(se *StatusError) (time.Duration, error) {
	switch ClassifyStatus(se.Status) {
	case StatusPermanent:
		return 0, fmt.Errorf("%w: %w", ErrPermanent, se)
	case StatusAuth:
		if c.authFailed() {
			return 0, fmt.Errorf("%w (HTTP %d)", ErrAuthFailed, se.Status)
		}
	}
	return se.RetryAfter, nil
}

// authFailed counts one refusal of the credentials (an upstream's 401 or
// 403, a proxy's 407) and reports whether that was one too many.
func (c *Client) authFailed() bool {
	c.authFailures++
	return c.authFailures >= c.opts.AuthFailuresMax
}

// wait counts the failure, gives up after MaxAttempts, and sleeps the backoff
// delay (at least floor). It returns false when ctx ended or the Client gave up.
func (c *Client) wait(ctx context.Context, cause error, floor time.Duration) bool {
	c.failures++
	if failed := c.failedAttempts(); c.opts.MaxAttempts > 0 && failed >= c.opts.MaxAttempts {
		c.err = fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, failed, cause)
		c.log.Error("upstream unreachable, giving up", zap.Int("attempt", failed), zap.Error(cause))
		return false
	}
	delay := c.opts.Backoff.DelayWithFloor(c.failures-1, c.lastDelay, floor)
	c.lastDelay = delay
	c.setState(StateWaiting)
	fields := lossFields(cause, c.failures, delay)
	if floor > 0 {
		fields = append(fields, zap.Duration("floor", floor))
	}
	c.log.Info("upstream reconnect scheduled", fields...)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// failedAttempts counts the dials (or unconfirmed connections) that failed in a
// row. The loss of a confirmed connection starts a streak but is not itself a
// failed attempt: MaxAttempts=1 still allows one reconnect attempt.
func (c *Client) failedAttempts() int {
	if !c.lostAt.IsZero() {
		return c.failures - 1
	}
	return c.failures
}

// confirmed is the one place the attempt counter resets (docs/design.md "Reset
// rule"): the server proved it is serving, not merely that the socket opened.
func (c *Client) confirmed(conn *Conn) {
	c.setState(StateConfirmed)
	fields := []zap.Field{zap.Uint64("gen", conn.gen), zap.Int("attempt", c.failures)}
	if !c.lostAt.IsZero() {
		downtime := c.opts.now().Sub(c.lostAt)
		fields = append(fields, zap.Duration("downtime", downtime))
		c.opts.Observer.Confirmed(downtime)
	}
	c.log.Info("upstream confirmed", fields...)
	c.failures = 0
	c.lastDelay = 0
	c.lostAt = time.Time{}
}

// keepStreamState carries an event stream's state to the next one, as an
// EventSource does: its last event ID, sent as Last-Event-ID, and its latest
// "retry" value. The retry value is a floor under tether's own backoff, not
// the delay: a server sends every client the same value, and a fleet that
// waited exactly that long would come back in lockstep (DelayWithFloor adds
// jitter over the whole Cap on top). It is capped like Retry-After. conn's
// reader has stopped: endWatch waited for it.
func (c *Client) keepStreamState(conn *Conn) {
	sc, ok := conn.ws.(*sseConn)
	if !ok {
		return
	}
	c.lastEventID = sc.lastEventID()
	if d, ok := sc.retry(); ok {
		c.retryFloor = min(d, MaxRetryAfter)
	}
}
