package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/browser"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/forwardpath"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/transport"
	"github.com/tetherproxy/tether/upstream"
)

// Options configures a Server. Fields follow the TETHER_* variables.
type Options struct {
	// Upstream is the template for every session's upstream client; Handler,
	// Protocols and Logger are set per session, Confirm and HeartbeatReply
	// are the protocol's (Rules.ConfirmMatch, Rules.HeartbeatReplyMatch).
	Upstream upstream.Options

	AcceptWait            time.Duration // how long an app handshake waits for the first dial
	OutboxMaxMessages     int
	OutboxMaxBytes        int
	OutboxOverflow        buffer.Overflow
	MaxSessions           int
	MaxMessageBytes       int64 // per message from the app (upstream's is in Upstream)
	DownstreamBufferBytes int64 // bytes queued towards the app before upstream reads pause
	HandshakeTimeout      time.Duration
	Logger                *zap.Logger
	// Rules are the TETHER_* message rules (internal/protocol's Rules): the
	// configuration of the rules protocol, which restores the app on every
	// new upstream connection (docs/design.md "Restoring the application, not
	// just the transport"). The zero Rules never look inside a message.
	Rules protocol.Rules
	// Protocol reads the app's and the upstream's messages for every
	// session. nil: the rules protocol of Rules. When set, what its
	// messages carry is its own to say.
	Protocol protocol.Protocol
	// Sequences is the sequencing policy (sequence.go), for the rules
	// protocol and Protocol alike.
	Sequences Sequences
	Metrics   Metrics // nil: nothing is counted
	// Budget is the memory budget (TETHER_MEMORY_LIMIT) every session's
	// queues towards its app count on, each session with an account of its
	// own: a session holding more than its share pauses its upstream reads
	// while the budget is full. nil: only each queue's own bound applies.
	Budget *budget.Budget

	// AllowedOrigins are the Origin header values an app's handshake may
	// carry (TETHER_ALLOWED_ORIGINS), each scheme://host[:port], compared
	// after browser.NormalizeOrigin (internal/browser); AnyOrigin allows any. A handshake without Origin
	// (a native app) is always accepted; one with another Origin (a web page)
	// is refused with 403. None by default: pages on localhost are foreign too.
	AllowedOrigins []string
	// AllowedHosts are Host names accepted besides loopback names
	// (localhost, *.localhost, 127.0.0.0/8, ::1) and the IP address the app
	// connected to: the host of TETHER_LISTEN when it is a name. Any other
	// Host is refused with 403 (DNS rebinding). Not checked on unix
	// listeners (ListenerUnix).
	AllowedHosts []string

	// TCPBinary is what tcp:// apps get for a binary upstream message
	// (TETHER_TCP_BINARY): base64 by default.
	TCPBinary BinaryPolicy
	// TCPNewline is what tcp:// apps get for an upstream text message
	// holding CR or LF (TETHER_TCP_NEWLINE): space by default.
	TCPNewline NewlinePolicy
	// ForwardPath joins each WebSocket app's request path and query onto
	// Upstream.URL (TETHER_FORWARD_PATH, rules in internal/forwardpath); a path that
	// cannot be joined is refused with 400. tcp:// apps have no path, and an
	// sse:// listener serves one fixed path.
	ForwardPath bool
	// SSELinger is how long an sse:// session outlives its app's request
	// (TETHER_SSE_LINGER), keeping its upstream connection and its events,
	// so that the app's EventSource, which reconnects by itself with the
	// id of the last event it got, resumes it with nothing lost or
	// repeated. 0: the session ends with the request, and a reconnecting
	// app gets a new session announced by a tether-gap event.
	SSELinger time.Duration
}

// AnyOrigin, alone in Options.AllowedOrigins, accepts every Origin.
const AnyOrigin = browser.AnyOrigin

// DefaultSSEKeepAlive is how long an sse:// stream may stay silent before
// tether writes a keep-alive comment, when the upstream heartbeat is off
// (Upstream.PingInterval 0); otherwise the heartbeat's interval is used.
const DefaultSSEKeepAlive = transport.DefaultSSEKeepAlive

// DefaultHandshakeTimeout bounds reading an app's handshake request, so a client
// that opens a socket and sends nothing (slowloris) does not hold a slot.
const DefaultHandshakeTimeout = 10 * time.Second

// Server accepts app connections and runs their sessions.
type Server struct {
	opts Options
	log  *zap.Logger

	ctx    context.Context // parent of every session; cancelled when Shutdown gives up
	cancel context.CancelFunc
	nextID atomic.Uint64
	rules  ruleSet // Options.Protocol or Options.Rules, compiled
	// upstream is Options.Upstream with the protocol's predicates, which
	// every session's client shares.
	upstream *upstream.Shared
	guard    *browser.Guard // Options.AllowedOrigins and AllowedHosts, compiled
	// forwardBase is Upstream.URL parsed, with Options.ForwardPath; nil
	// without: every session dials the URL as configured.
	forwardBase *url.URL
	totals      restoreTotals // RestoreCounters
	// sseJSON: upstream messages are SSE events as JSON objects, which
	// sse:// apps get back as events of the upstream's type.
	sseJSON bool
	// readOnly: the upstream is SSE and takes no messages; apps' are dropped.
	readOnly bool

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*Session]struct{}
	sseTokens map[string]*Session // sse:// sessions by token, lingering ones included
	draining  bool
	// drainStarted is closed when the drain starts: a handshake waiting
	// for its first dial stops waiting (firstDial) and is refused with 503.
	drainStarted chan struct{}
	wg           sync.WaitGroup // accept loops and connection handlers
}

// New returns a Server; it listens only when Serve is called.
func New(opts Options) (*Server, error) {
	if opts.Upstream.URL == "" {
		return nil, errors.New("proxy: upstream URL is required")
	}
	if opts.OutboxMaxMessages <= 0 || opts.OutboxMaxBytes <= 0 {
		return nil, errors.New("proxy: outbox caps must be > 0")
	}
	if opts.MaxSessions <= 0 {
		return nil, errors.New("proxy: MaxSessions must be > 0")
	}
	if opts.Upstream.Confirm != nil || opts.Upstream.HeartbeatReply != nil {
		// The protocol reads messages, the upstream client only asks it.
		return nil, errors.New("proxy: Upstream.Confirm and HeartbeatReply come from the protocol: set Rules.ConfirmMatch and Rules.HeartbeatReplyMatch")
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	guard, err := browser.NewGuard(opts.AllowedOrigins, opts.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	var base *url.URL
	if opts.ForwardPath {
		if base, err = forwardpath.ParseBase(opts.Upstream.URL); err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	rules := newRuleSet(opts.Protocol, opts.Rules, opts.Sequences)
	shared, err := shareUpstream(opts, rules)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts: opts, log: log, ctx: ctx, cancel: cancel, rules: rules, guard: guard,
		upstream: shared, forwardBase: base,
		sseJSON:   sseJSONUpstream(opts.Upstream),
		readOnly:  readOnlyUpstream(opts.Upstream),
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*Session]struct{}{},
		sseTokens: map[string]*Session{},

		drainStarted: make(chan struct{}),
	}, nil
}

// Serve accepts WebSocket apps on ln until Shutdown closes it: ServeKind(ln,
// ListenerWS).
func (s *Server) Serve(ln net.Listener) error { return s.ServeKind(ln, ListenerWS) }

// ServeKind accepts apps speaking kind on ln until Shutdown closes it. It
// returns nil after Shutdown, or the accept error that stopped it. Several
// listeners, of any kinds, may be served at once: they share the server's
// options, sessions and MaxSessions. An unknown kind is an error, and ln is
// closed.
//
// ln is the caller's, ready to accept: a unix listener's socket file, its
// mode and a stale file left by a previous run are the caller's to handle.
// An sse:// listener answers on the path of an *SSEListener, "/" for
// another listener.
func (s *Server) ServeKind(ln net.Listener, kind ListenerKind) error {
	if !kind.valid() {
		_ = ln.Close()
		return errUnknownKind(kind)
	}
	if kind == ListenerSSE {
		if err := checkSSEPath(ssePath(ln)); err != nil {
			_ = ln.Close()
			return err
		}
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	if kind == ListenerSSE {
		return s.serveSSE(ln, ssePath(ln))
	}
	return s.acceptLoop(ln, kind)
}

// acceptLoop backs off on temporary accept errors (EMFILE) instead of spinning.
func (s *Server) acceptLoop(ln net.Listener, kind ListenerKind) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isDraining() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() && !isTemporary(err) {
				return fmt.Errorf("accept: %w", err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed, retrying", zap.Error(err), zap.Duration("delay", delay))
			if !s.pause(delay) {
				return nil
			}
			continue
		}
		delay = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(nc, kind)
		}()
	}
}

// isTemporary reports accept errors worth retrying (descriptor exhaustion).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// pause waits d unless the server stops first.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// sseKeepAlive is the keep-alive interval of sse:// streams: the upstream
// heartbeat's, which is short enough for the proxies between an app and
// tether (most close connections idle for 60 s or more), or
// DefaultSSEKeepAlive when the heartbeat is off.
func (s *Server) sseKeepAlive() time.Duration {
	if d := s.opts.Upstream.PingInterval; d > 0 {
		return d
	}
	return DefaultSSEKeepAlive
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Sessions reports the number of live sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Ready reports whether the server accepts new apps (for /readyz).
func (s *Server) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return errors.New("draining")
	case len(s.listeners) == 0:
		return errors.New("not listening")
	}
	return nil
}

// admit registers a session unless the server is draining or full. A refusal
// comes with its Reject* reason.
func (s *Server) admit(sess *Session) (refusal string, err error) {
	refusal, err = s.register(sess)
	if err == nil {
		s.opts.Metrics.SessionStarted(string(sess.kind))
	}
	return refusal, err
}

func (s *Server) register(sess *Session) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return labels.RejectDraining, errDrainingRefusal
	case len(s.sessions) >= s.opts.MaxSessions:
		return labels.RejectMaxSessions, ws.RejectConnectionError(ws.RejectionStatus(503),
			ws.RejectionReason(fmt.Sprintf("too many sessions (TETHER_MAX_SESSIONS=%d)", s.opts.MaxSessions)))
	}
	s.sessions[sess] = struct{}{}
	return "", nil
}

// errDrainingRefusal answers a handshake during the drain.
var errDrainingRefusal = ws.RejectConnectionError(ws.RejectionStatus(503), ws.RejectionReason("tether is shutting down"))

// forget unregisters a session; a second call for the same one does nothing.
func (s *Server) forget(sess *Session) {
	s.mu.Lock()
	_, known := s.sessions[sess]
	delete(s.sessions, sess)
	s.mu.Unlock()
	if sess.acct != nil {
		sess.acct.Close() // what its queues still hold goes with it
	}
	if known {
		s.opts.Metrics.SessionEnded(string(sess.kind))
	}
}

// Shutdown stops accepting, closes every app with 1001 spread evenly over drain
// (so apps that reconnect elsewhere do not arrive at once), lets each session
// close its upstream with 1000, and waits for all of them. When ctx ends first,
// the remaining sessions are cut at once. It is idempotent.
//
// Readiness (Ready) fails from the first instruction on, before any app is
// closed, so a load balancer stops sending new apps while the drain runs.
func (s *Server) Shutdown(ctx context.Context, drain time.Duration) error {
	start := time.Now()
	s.mu.Lock()
	if !s.draining {
		close(s.drainStarted)
	}
	s.draining = true
	for ln := range s.listeners {
		_ = ln.Close()
	}
	s.mu.Unlock()
	sessions := s.snapshot()
	s.opts.Metrics.DrainStarted()
	s.log.Info("drain started", zap.Int("sessions", len(sessions)), zap.Duration("drain_timeout", drain))
	s.spreadClose(ctx, sessions, drain)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		s.log.Info("drain finished", zap.Int("sessions", len(sessions)), zap.Duration("duration", time.Since(start)))
		return nil
	case <-ctx.Done():
		cut := s.Sessions()
		s.cancel() // cuts upstream dials and backoff waits of stragglers
		s.cutApps()
		<-done
		s.log.Warn("drain deadline passed, remaining sessions cut", zap.Int("sessions", len(sessions)),
			zap.Int("cut", cut), zap.Duration("duration", time.Since(start)))
		return ctx.Err()
	}
}

// cutApps aborts the app socket of every session left once Shutdown gave
// up waiting, instead of waiting out its closing handshake. Sessions are
// registered before their app is set, and none after the drain started:
// one whose app is not set yet sees the end of the server's context in
// serve, which is ended before this, and cuts its app itself.
func (s *Server) cutApps() {
	for _, sess := range s.snapshot() {
		select {
		case <-sess.appReady:
			sess.app.Abort()
		default:
		}
	}
}

func (s *Server) spreadClose(ctx context.Context, sessions []*Session, drain time.Duration) {
	if len(sessions) == 0 {
		return
	}
	step := drain / time.Duration(len(sessions))
	t := time.NewTimer(0)
	defer t.Stop()
	for i, sess := range sessions {
		if i > 0 && step > 0 {
			t.Reset(step)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
}
