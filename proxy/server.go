package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/upstream"
)

// Options configures a Server. Fields follow the TETHER_* variables.
type Options struct {
	// Upstream is the template for every session's upstream client; Handler,
	// Protocols and Logger are set per session.
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
	Rules                 Rules   // restoring the app on new connections (rules.go)
	Metrics               Metrics // nil: nothing is counted

	// AllowedOrigins are the Origin header values an app's handshake may
	// carry (TETHER_ALLOWED_ORIGINS), each scheme://host[:port], compared
	// after NormalizeOrigin; AnyOrigin allows any. A handshake without Origin
	// (a native app) is always accepted; one with another Origin (a web page)
	// is refused with 403. None by default: pages on localhost are foreign too.
	AllowedOrigins []string
	// AllowedHosts are Host names accepted besides loopback names
	// (localhost, *.localhost, 127.0.0.0/8, ::1) and the IP address the app
	// connected to: the host of TETHER_LISTEN when it is a name. Any other
	// Host is refused with 403 (DNS rebinding).
	AllowedHosts []string
}

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
	rules  ruleSet       // Options.Rules, compiled
	guard  *browserGuard // Options.AllowedOrigins and AllowedHosts, compiled
	totals restoreTotals // RestoreCounters

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*Session]struct{}
	draining  bool
	wg        sync.WaitGroup // accept loops and connection handlers
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
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	guard, err := newBrowserGuard(opts.AllowedOrigins, opts.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts: opts, log: log, ctx: ctx, cancel: cancel, rules: newRuleSet(opts.Rules), guard: guard,
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*Session]struct{}{},
	}, nil
}

// Serve accepts app connections on ln until Shutdown closes it. It returns nil
// after Shutdown, or the accept error that stopped it.
func (s *Server) Serve(ln net.Listener) error {
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
	return s.acceptLoop(ln)
}

// acceptLoop backs off on temporary accept errors (EMFILE) instead of spinning.
func (s *Server) acceptLoop(ln net.Listener) error {
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
			s.handle(nc)
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
		s.opts.Metrics.SessionStarted()
	}
	return refusal, err
}

func (s *Server) register(sess *Session) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return RejectDraining, ws.RejectConnectionError(ws.RejectionStatus(503), ws.RejectionReason("tether is shutting down"))
	case len(s.sessions) >= s.opts.MaxSessions:
		return RejectMaxSessions, ws.RejectConnectionError(ws.RejectionStatus(503),
			ws.RejectionReason(fmt.Sprintf("too many sessions (TETHER_MAX_SESSIONS=%d)", s.opts.MaxSessions)))
	}
	s.sessions[sess] = struct{}{}
	return "", nil
}

// forget unregisters a session; a second call for the same one does nothing.
func (s *Server) forget(sess *Session) {
	s.mu.Lock()
	_, known := s.sessions[sess]
	delete(s.sessions, sess)
	s.mu.Unlock()
	if known {
		s.opts.Metrics.SessionEnded()
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
		<-done
		s.log.Warn("drain deadline passed, remaining sessions cut", zap.Int("sessions", len(sessions)),
			zap.Int("cut", cut), zap.Duration("duration", time.Since(start)))
		return ctx.Err()
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
