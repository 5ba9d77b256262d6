package upstreamtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// connsBuffer is the capacity of the Server.Conns channel.
	connsBuffer = 64
	// defaultMaxMessageBytes bounds one reassembled client message; gobwas'
	// own zero means unlimited, which a test peer should not copy.
	defaultMaxMessageBytes = 64 << 20
	// defaultCloseWait is how long CloseWith waits for the client's close
	// frame before closing TCP (RFC 6455 section 7.1.1: the server closes TCP
	// first, after the closing handshake).
	defaultCloseWait = time.Second
	// acceptRetryDelay spaces accept attempts after a non-fatal accept error
	// (EMFILE and the like) so the loop does not spin.
	acceptRetryDelay = 10 * time.Millisecond
)

// Options configures a Server. The zero value is an echo server that accepts
// every handshake.
type Options struct {
	// Handshake decides, for every handshake request, how to answer. nil
	// accepts all. Return status 0 to accept (header, if any, is added to the
	// 101 response), or an HTTP status such as 401, 404 or 503 to refuse with
	// that status and header (for example Retry-After). It may run
	// concurrently for concurrent connections.
	Handshake func(h Handshake) (status int, header http.Header)
	// OnConn scripts one accepted WebSocket connection. It runs in its own
	// goroutine; the server closes the TCP connection (without a close frame)
	// when it returns. nil echoes every data message back with its opcode.
	OnConn func(c *Conn)
	// Subprotocols the server may select: the first protocol the client offers
	// that is listed here is selected.
	Subprotocols []string
	// Greeting, when not empty, is a text message written in the same Write
	// call as the 101 response, so it reaches the client in the same TCP
	// segment as the handshake answer.
	Greeting string
	// IgnorePings and IgnoreClose preset Conn.IgnorePings and
	// Conn.IgnoreClose before the connection's first frame is read, which
	// calling them from OnConn cannot guarantee.
	IgnorePings bool
	IgnoreClose bool
	// MaxMessageBytes bounds a reassembled client message; a bigger one is
	// answered with close 1009. Default 64 MiB.
	MaxMessageBytes int64
	// CloseWait is how long CloseWith waits for the client's close frame
	// before closing TCP. Default 1s.
	CloseWait time.Duration
	// TLS, when set, makes the server speak wss: every accepted connection
	// is wrapped with tls.Server (see SelfSignedTLS) and URL starts with
	// "wss://".
	TLS *tls.Config
	// Logf, when set, receives one line per connection event (t.Logf fits).
	Logf func(format string, args ...any)
	// InboxMessages is how many reassembled client messages wait for
	// Conn.Read before the connection's reader stops reading the socket.
	// Default 1024; 1 makes the socket's receive buffer the only one, as
	// for a server that reads a message only when it handles it.
	InboxMessages int
	// Addr is the address to listen on; default "127.0.0.1:0". Another
	// loopback address (127.0.0.2:port) lets a test give a name two
	// addresses.
	Addr string
	// ReceiveBuffer, when above 0, sets each accepted socket's receive
	// buffer (SO_RCVBUF), which turns the kernel's autotuning off: the
	// window a reader opens as it reads then moves in steps of a size the
	// test knows.
	ReceiveBuffer int
}

// Handshake describes one handshake request, as seen by Options.Handshake.
type Handshake struct {
	// N is the 1-based number of this handshake among all handshakes the
	// server has seen.
	N int
	// Header holds the request headers, Authorization included. Host is
	// stored under "Host" too (net/http would move it to Request.Host).
	// Upgrade, Connection and Sec-WebSocket-* are not included.
	Header http.Header
	// Path is the request URI, query included.
	Path string
	// Protocols are the subprotocols the client offered, in its order.
	Protocols []string
}

// Server is a scriptable WebSocket upstream on 127.0.0.1. See the package
// documentation for its concurrency contract.
type Server struct {
	opts   Options
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	conns  chan *Conn

	handshakes atomic.Int64
	accepted   atomic.Int64

	mu     sync.Mutex
	live   map[net.Conn]*Conn // nil value: still handshaking
	closed bool

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewServer starts a Server listening on Options.Addr, 127.0.0.1:0 by
// default.
func NewServer(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = defaultCloseWait
	}
	if opts.InboxMessages <= 0 {
		opts.InboxMessages = inboxSize
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:   opts,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(chan *Conn, connsBuffer),
		live:   make(map[net.Conn]*Conn),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the listening address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "ws://127.0.0.1:PORT/" ("wss://..." with Options.TLS).
func (s *Server) URL() string {
	if s.opts.TLS != nil {
		return "wss://" + s.Addr() + "/"
	}
	return "ws://" + s.Addr() + "/"
}

// Conns delivers every accepted WebSocket connection, in accept order. The
// channel holds 64 connections; when it is full, further connections are not
// delivered (they still run OnConn) so an unread channel never blocks the
// server. Tests that use it should drain it as they go.
func (s *Server) Conns() <-chan *Conn { return s.conns }

// Handshakes is the number of handshake requests seen so far, refused ones
// included (malformed requests that never reach the decision are not counted).
func (s *Server) Handshakes() int { return int(s.handshakes.Load()) }

// Close stops the listener, closes every live connection (no close frame),
// cancels every Conn.Context and waits for all goroutines, OnConn included.
// It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeErr = s.ln.Close()
		for raw, c := range s.shutdownLive() {
			if c != nil {
				_ = c.Close()
			} else {
				_ = raw.Close()
			}
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// shutdownLive marks the server closed and returns a snapshot of its live
// connections, so they are closed without holding the lock.
func (s *Server) shutdownLive() map[net.Conn]*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	snapshot := make(map[net.Conn]*Conn, len(s.live))
	for raw, c := range s.live {
		snapshot[raw] = c
	}
	return snapshot
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			if !s.waitAfterAcceptError(err) {
				return
			}
			continue
		}
		if tc, ok := raw.(*net.TCPConn); ok && s.opts.ReceiveBuffer > 0 {
			_ = tc.SetReadBuffer(s.opts.ReceiveBuffer)
		}
		if s.opts.TLS != nil {
			// The TLS handshake runs lazily on first use, inside serve's
			// handshake deadline.
			raw = tls.Server(raw, s.opts.TLS)
		}
		s.wg.Add(1)
		go s.serve(raw)
	}
}

// waitAfterAcceptError reports whether accepting should go on after err,
// waiting a little first so a persistent error does not spin the loop.
func (s *Server) waitAfterAcceptError(err error) bool {
	if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
		return false
	}
	s.logf("upstreamtest: accept: %v", err)
	t := time.NewTimer(acceptRetryDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// serve owns one TCP connection from accept to close.
func (s *Server) serve(raw net.Conn) {
	defer s.wg.Done()
	if !s.track(raw, nil) {
		_ = raw.Close()
		return
	}
	defer s.untrack(raw)
	c, err := s.handshake(raw)
	if err != nil {
		s.logf("upstreamtest: handshake from %s: %v", raw.RemoteAddr(), err)
		_ = raw.Close()
		return
	}
	if !s.track(raw, c) {
		_ = c.Close()
		return
	}
	s.logf("upstreamtest: conn %d open (protocol %q)", c.n, c.protocol)
	s.wg.Add(1)
	go c.readLoop(&s.wg)
	s.publish(c)
	s.run(c)
	_ = c.Close()
	s.logf("upstreamtest: conn %d closed", c.n)
}

func (s *Server) run(c *Conn) {
	if s.opts.OnConn != nil {
		s.opts.OnConn(c)
		return
	}
	echo(c)
}

// publish offers c on the Conns channel without ever blocking the server.
func (s *Server) publish(c *Conn) {
	select {
	case s.conns <- c:
	default:
		s.logf("upstreamtest: Conns channel full, conn %d not delivered", c.n)
	}
}

// track records raw (and its Conn once upgraded) so Close can reach it. It
// reports false when the server is already closed.
func (s *Server) track(raw net.Conn, c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.live[raw] = c
	return true
}

func (s *Server) untrack(raw net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, raw)
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// echo is the default OnConn: every data message goes back with its opcode.
func echo(c *Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if err := c.write(op, data); err != nil {
			if errors.Is(err, ErrStalled) {
				// Returning would close TCP and end the half-open state
				// the test asked for.
				<-c.Done()
			}
			return
		}
	}
}
