package upstreamtest

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// inboxSize is how many reassembled client messages wait for Read before the
// reader goroutine stops reading from the socket (TCP backpressure), unless
// Options.InboxMessages says otherwise.
const inboxSize = 1024

// aLongTimeAgo is a deadline in the past, used to wake a blocked Read.
var aLongTimeAgo = time.Unix(1, 0)

// message is one reassembled data message from the client.
type message struct {
	op   ws.OpCode
	data []byte
}

// Conn is the server side of one upstream WebSocket connection. Its methods
// are safe for concurrent use; writes are serialised by one mutex.
type Conn struct {
	n         int
	path      string
	header    http.Header
	protocol  string
	raw       net.Conn
	maxMsg    int64
	closeWait time.Duration
	logf      func(format string, args ...any)

	ctx    context.Context
	cancel context.CancelFunc

	// wmu serialises frame writes and makes the stalled/sentClose checks
	// atomic with the write they guard.
	wmu       sync.Mutex
	sentClose bool
	stalled   atomic.Bool

	ignorePings atomic.Bool
	ignoreClose atomic.Bool
	pings       atomic.Int64
	pongs       atomic.Int64

	in         chan message  // closed by the reader when it ends
	gotClose   chan struct{} // closed when the client's close frame was read
	readerIdle chan struct{} // closed when the reader stopped reading the socket
	stall      chan struct{} // closed by Stall
	stallOnce  sync.Once

	mu         sync.Mutex // guards closeFrame and readErr
	closeFrame *CloseFrame
	readErr    error

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
}

func newConn(s *Server, raw net.Conn, req *request) *Conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &Conn{
		n:          int(s.accepted.Add(1)),
		path:       req.path,
		header:     req.header,
		protocol:   req.selected,
		raw:        raw,
		maxMsg:     s.opts.MaxMessageBytes,
		closeWait:  s.opts.CloseWait,
		logf:       s.logf,
		ctx:        ctx,
		cancel:     cancel,
		in:         make(chan message, s.opts.InboxMessages),
		gotClose:   make(chan struct{}),
		readerIdle: make(chan struct{}),
		stall:      make(chan struct{}),
		closed:     make(chan struct{}),
	}
	c.ignorePings.Store(s.opts.IgnorePings)
	c.ignoreClose.Store(s.opts.IgnoreClose)
	return c
}

// N is the 1-based number of this connection among the server's accepted
// WebSocket connections.
func (c *Conn) N() int { return c.n }

// Header returns a copy of the handshake request headers (see Handshake.Header).
func (c *Conn) Header() http.Header { return c.header.Clone() }

// Path is the handshake request URI.
func (c *Conn) Path() string { return c.path }

// Protocol is the negotiated subprotocol, "" when none.
func (c *Conn) Protocol() string { return c.protocol }

// Context is cancelled when the connection is closed or the server closes;
// scripts in OnConn should use it for their waits.
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed once the connection is closed, locally or because the
// client went away.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Pings is the number of ping frames received so far.
func (c *Conn) Pings() int { return int(c.pings.Load()) }

// Pongs is the number of pong frames received so far.
func (c *Conn) Pongs() int { return int(c.pongs.Load()) }

// IgnorePings turns pong replies off (on=true) or back on: with it on, the
// connection looks half-open to a client that relies on pongs.
func (c *Conn) IgnorePings(on bool) { c.ignorePings.Store(on) }

// IgnoreClose stops the server from echoing the client's close frame and
// from closing TCP after it, so the client's close-handshake timeout is
// exercised: TCP then stays open until OnConn returns or Close. (With the
// default echo OnConn, that is as soon as Read returns the *CloseFrame.)
func (c *Conn) IgnoreClose(on bool) { c.ignoreClose.Store(on) }

// ReceivedClose returns the close frame the client sent, if any.
func (c *Conn) ReceivedClose() (code int, reason string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeFrame == nil {
		return 0, "", false
	}
	return c.closeFrame.Code, c.closeFrame.Reason, true
}

// Stall makes the connection half-open: from now on nothing is read and
// nothing is written (no pongs, no close echo, Send fails with ErrStalled),
// while TCP stays open until Close. A frame being written when Stall is
// called completes first; when Stall returns, the reader has stopped, so no
// byte the client sends afterwards is consumed (closing the connection later
// therefore sends RST, as the kernel does for unread data).
func (c *Conn) Stall() {
	c.wmu.Lock()
	c.stalled.Store(true)
	c.wmu.Unlock()
	c.stallOnce.Do(func() { close(c.stall) })
	// Wake the reader out of its blocking socket read; it sees the stall
	// flag and parks until Close.
	_ = c.raw.SetReadDeadline(aLongTimeAgo)
	<-c.readerIdle
}

// Close closes TCP without a close frame. It is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.raw.Close()
		c.cancel()
		close(c.closed)
	})
	return c.closeErr
}

// Reset aborts the connection with a TCP RST (SO_LINGER 0, then close), as a
// crashed server or a middlebox would.
func (c *Conn) Reset() error {
	setLingerZero(c.raw)
	return c.Close()
}

// CloseWith sends a close frame with any code (1012 and 1013 included; the
// code is not validated so tests can send whatever a real server might), waits
// up to Options.CloseWait for the client's close frame, then closes TCP.
func (c *Conn) CloseWith(code int, reason string) error {
	if len(reason) > ws.MaxControlFramePayloadSize-2 {
		return ErrControlTooLong
	}
	err := c.writeControl(ws.OpClose, ws.NewCloseFrameBody(ws.StatusCode(code), reason))
	if err == nil {
		c.awaitClose()
	}
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}

// awaitClose waits for the client's close frame, the connection's end, or
// the close timeout, whichever comes first.
func (c *Conn) awaitClose() {
	t := time.NewTimer(c.closeWait)
	defer t.Stop()
	select {
	case <-c.gotClose:
	case <-c.closed:
	case <-t.C:
	}
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// setLingerZero makes the next Close send RST instead of FIN.
func setLingerZero(conn net.Conn) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}
