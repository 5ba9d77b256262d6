package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// lineConn is a tcp:// app's socket, seen by its Session as the app side
// of a WebSocket (appConn): each line the app writes is one text message,
// each message to the app is written as one line.
//
// Reading: a line ends with "\n"; a "\r" right before it is dropped too, so
// "\r\n" works. The line is read into one reusable buffer, which grows as a
// long line arrives up to MaxLineBytes (plus the terminator) and is released
// once it outgrows maxRetainedLineBuffer; a longer line stops the reader
// without sending anything (*lineError, the app is closed as a WebSocket
// app would be with 1009). An empty line is skipped: apps send them as
// keep-alives, and an empty text message means nothing to a WebSocket
// server. A line that is not UTF-8 closes the app (a text message must be,
// RFC 6455 §8.1; 1007 for a WebSocket app). Bytes after the last newline
// when the app disconnects are not sent (*partialLineError): a message cut
// off by a crash must not pass for a whole one.
//
// Writing: as wsconn's, one writer goroutine takes the whole queue at once,
// so a lone message costs one write and a backlog few large ones; the queue
// holds at most QueueBytes (the encoded lines) and Send blocks beyond, which
// is the back-pressure on upstream reads. Binary messages and text holding a
// line break follow lineOptions.Binary and Newline: a line never carries
// a raw newline, so the app's stream cannot be split wrongly.
//
// Closing: there is no close frame. Close writes what is queued, half-closes
// (FIN), waits up to CloseWait for the app to close its side, then closes
// the socket; the code and reason a WebSocket app would have got are logged.
//
// Concurrency: ReadMessage is called from one goroutine (the session's
// reader); Send, Close, Abort, Done and Queued are safe for concurrent use.
type lineConn struct {
	nc   net.Conn
	opts lineOptions

	// Reader state, touched only by the reading goroutine. The unread bytes
	// are rbuf[rpos:rend]; the first scanned of them hold no newline.
	rbuf       []byte
	rpos, rend int
	scanned    int
	readErr    error

	readDone chan struct{} // closed when the reader has stopped for good
	readOnce sync.Once
	violated atomic.Bool // the reader stopped on a rule the app broke, the socket is still open

	closed    atomic.Bool   // Close or Abort was called (read without the lock by Send)
	wake      chan struct{} // one slot: something was queued for an idle writer
	quit      chan struct{} // closed by Abort
	done      chan struct{} // closed when the writer has exited and the socket is closed
	abortOnce sync.Once

	mu      sync.Mutex // guards the queue
	out     []byte     // encoded lines waiting to be written
	spare   []byte     // the writer's last buffer, reused for the next queue
	queued  int64
	active  bool // the writer is at work or has been woken
	closing bool // Close or Abort was called: nothing more is queued
	space   chan struct{}
	waiting bool

	warned [2]atomic.Bool // first drop by policy logged: [0] binary, [1] newline
}

// lineOptions configures a lineConn. Zero sizes take wsconn's defaults.
type lineOptions struct {
	MaxLineBytes int64 // longest line from the app, terminator excluded
	QueueBytes   int64 // encoded bytes queued towards the app before Send blocks
	CloseWait    time.Duration
	Binary       BinaryPolicy
	Newline      NewlinePolicy
	Log          *zap.Logger
	Dropped      func(reason string) // a message not forwarded, by Drop* reason
	Delivered    func()              // a message queued towards the app
}

const (
	// initialLineBuffer is the read buffer of a fresh connection.
	initialLineBuffer = 4 << 10
	// maxRetainedLineBuffer is the largest read or write buffer kept once
	// the line or backlog that grew it is gone.
	maxRetainedLineBuffer = 64 << 10
	// lingerBytes bounds what is read and discarded from an app closed for
	// breaking a rule, before its socket is closed.
	lingerBytes = 1 << 20
)

// errLineClosed is returned by Send once a tcp:// app is closing.
var errLineClosed = errors.New("tcp app connection closed")

// lineError is a rule of tcp:// the app broke; the app is closed. Code and
// Reason are what a WebSocket app would have got in its close frame, Drop
// the tether_app_dropped_total reason.
type lineError struct {
	Code   ws.StatusCode
	Reason string
	Drop   string
}

func (e *lineError) Error() string {
	return fmt.Sprintf("tcp app broke the line rules (%d): %s", e.Code, e.Reason)
}

// partialLineError is an app that disconnected after bytes that no newline
// ended; they were not sent upstream.
type partialLineError struct{ n int }

func (e *partialLineError) Error() string {
	return fmt.Sprintf("connection ended inside a line: %d bytes without a newline not sent", e.n)
}

func newLineConn(nc net.Conn, opts lineOptions) *lineConn {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = wsconn.DefaultMaxMessageBytes
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = wsconn.DefaultQueueBytes
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = wsconn.DefaultCloseWait
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Dropped == nil {
		opts.Dropped = func(string) {}
	}
	if opts.Delivered == nil {
		opts.Delivered = func() {}
	}
	c := &lineConn{
		nc:       nc,
		opts:     opts,
		readDone: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		space:    make(chan struct{}),
	}
	go c.writeLoop()
	return c
}

// ---- reading ----

// ReadMessage returns the next non-empty line as a text message, without
// its terminator. It is valid until the next call. After a broken rule it
// returns *lineError (the app is being closed); after the app disconnected
// inside a line, *partialLineError; otherwise the socket's error (io.EOF
// when the app closed). Every later call returns the same error.
func (c *lineConn) ReadMessage() (ws.OpCode, []byte, error) {
	if c.readErr != nil {
		return 0, nil, c.readErr
	}
	for {
		line, err := c.readLine()
		if err == nil && len(line) == 0 {
			continue // a keep-alive, not a message
		}
		if err == nil && !utf8.Valid(line) {
			err = &lineError{Code: ws.StatusInvalidFramePayloadData, Reason: "line is not valid UTF-8", Drop: DropInvalidUTF8}
		}
		if err != nil {
			c.readErr = err
			c.readFailed(err)
			return 0, nil, err
		}
		return ws.OpText, line, nil
	}
}

// readLine returns the next line, "\r\n" or "\n" cut off.
func (c *lineConn) readLine() ([]byte, error) {
	c.release()
	for {
		if i := bytes.IndexByte(c.rbuf[c.rpos+c.scanned:c.rend], '\n'); i >= 0 {
			end := c.rpos + c.scanned + i
			line := bytes.TrimSuffix(c.rbuf[c.rpos:end], []byte{'\r'})
			c.rpos, c.scanned = end+1, 0
			if int64(len(line)) > c.opts.MaxLineBytes {
				return nil, c.tooLong()
			}
			return line, nil
		}
		c.scanned = c.rend - c.rpos
		// MaxLineBytes and "\r" fit in MaxLineBytes+1 bytes: with more and
		// no newline, the line is too long whatever comes next.
		if int64(c.scanned) > c.opts.MaxLineBytes+1 {
			return nil, c.tooLong()
		}
		if err := c.fill(); err != nil {
			if errors.Is(err, io.EOF) && c.scanned > 0 {
				return nil, &partialLineError{n: c.scanned}
			}
			return nil, err
		}
	}
}

func (c *lineConn) tooLong() error {
	return &lineError{
		Code:   ws.StatusMessageTooBig,
		Reason: fmt.Sprintf("line exceeds the size limit (TETHER_MAX_MESSAGE_BYTES=%d)", c.opts.MaxLineBytes),
		Drop:   DropTooLarge,
	}
}

// release lets go of a read buffer a long line grew, once it is empty.
func (c *lineConn) release() {
	if c.rpos != c.rend {
		return
	}
	c.rpos, c.rend = 0, 0
	if len(c.rbuf) > maxRetainedLineBuffer {
		c.rbuf = nil
	}
}

// fill reads more bytes after rbuf[rend], making room first.
func (c *lineConn) fill() error {
	if c.rend == len(c.rbuf) {
		c.makeRoom()
	}
	n, err := c.nc.Read(c.rbuf[c.rend:])
	c.rend += n
	if n > 0 {
		return nil // an error comes back with the next read
	}
	return err
}

// makeRoom moves the unread bytes to the front of the buffer or, when they
// fill it, grows it: doubling, up to the longest line and its terminator.
// readLine's length check guarantees the buffer is below that size here.
func (c *lineConn) makeRoom() {
	if c.rpos > 0 {
		c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
		c.rpos = 0
		if c.rend < len(c.rbuf) {
			return
		}
	}
	size := min(int64(max(initialLineBuffer, 2*len(c.rbuf))), c.opts.MaxLineBytes+2)
	nb := make([]byte, size)
	copy(nb, c.rbuf[:c.rend])
	c.rbuf = nb
}

// readFailed records that the reader stopped. After a broken rule the
// socket is still open: the app is closed, and the writer drains what the
// app still sends before closing the socket (see finishClose).
func (c *lineConn) readFailed(err error) {
	var le *lineError
	if errors.As(err, &le) {
		c.violated.Store(true)
		c.readOnce.Do(func() { close(c.readDone) })
		c.shutdown() // logged by the session, with the code and reason
		return
	}
	c.readOnce.Do(func() { close(c.readDone) })
}

// ---- writing ----

// lineEncoding is how an upstream message becomes a line.
type lineEncoding int

const (
	encRaw    lineEncoding = iota // text without a line break, as is
	encSpaces                     // text whose CR and LF become spaces
	encBase64                     // a binary message, base64-encoded
)

// Send queues one upstream message as a line. It blocks while QueueBytes
// are queued, until ctx ends or the connection closes. A message the
// policies drop returns nil; one whose policy closes the app returns
// errLineClosed, as does any Send once the app is closing.
func (c *lineConn) Send(ctx context.Context, op ws.OpCode, p []byte) error {
	if c.closed.Load() {
		return errLineClosed // before the policies: nothing is dropped twice
	}
	enc, ok, err := c.shape(op, p)
	if !ok {
		return err
	}
	n := int64(len(p)) + 1
	if enc == encBase64 {
		n = int64(base64.StdEncoding.EncodedLen(len(p))) + 1
	}
	for {
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			return errLineClosed
		}
		if c.queued == 0 || c.queued+n <= c.opts.QueueBytes {
			c.appendLocked(enc, p)
			c.queued += n
			c.kickLocked()
			c.mu.Unlock()
			c.opts.Delivered()
			return nil
		}
		c.waiting = true
		wake := c.space
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return errLineClosed
		}
	}
}

// shape applies the binary and newline policies. ok is false when the
// message is not written: dropped (err nil) or the app is being closed.
func (c *lineConn) shape(op ws.OpCode, p []byte) (enc lineEncoding, ok bool, err error) {
	if op == ws.OpBinary {
		switch c.opts.Binary {
		case BinaryBase64:
			return encBase64, true, nil
		case BinaryDrop:
			c.dropped(DropBinary, len(p))
			return 0, false, nil
		}
		c.opts.Dropped(DropBinary)
		c.Close(ws.StatusUnsupportedData, "binary message on a tcp:// listener (TETHER_TCP_BINARY=close)")
		return 0, false, errLineClosed
	}
	if bytes.IndexByte(p, '\n') < 0 && bytes.IndexByte(p, '\r') < 0 {
		return encRaw, true, nil
	}
	switch c.opts.Newline {
	case NewlineSpace:
		return encSpaces, true, nil
	case NewlineDrop:
		c.dropped(DropNewline, len(p))
		return 0, false, nil
	}
	c.opts.Dropped(DropNewline)
	c.Close(ws.StatusUnsupportedData, "text message with a line break on a tcp:// listener (TETHER_TCP_NEWLINE=close)")
	return 0, false, errLineClosed
}

// dropped counts and logs a message a drop policy kept from the app. The
// first drop of each kind is a warning naming the policy; later ones are
// counted and logged at debug, so a binary feed cannot flood the log.
func (c *lineConn) dropped(reason string, n int) {
	c.opts.Dropped(reason)
	i, policy := 0, c.opts.Binary.String()
	if reason == DropNewline {
		i, policy = 1, c.opts.Newline.String()
	}
	fields := []zap.Field{zap.String("reason", reason), zap.String("policy", policy), zap.Int("bytes", n)}
	if c.warned[i].CompareAndSwap(false, true) {
		c.opts.Log.Warn("upstream message dropped for the tcp app by policy (later drops are logged at debug)", fields...)
		return
	}
	c.opts.Log.Debug("upstream message dropped for the tcp app by policy", fields...)
}

// appendLocked encodes one line at the end of the queue. c.mu is held.
func (c *lineConn) appendLocked(enc lineEncoding, p []byte) {
	switch enc {
	case encBase64:
		c.out = base64.StdEncoding.AppendEncode(c.out, p)
	case encSpaces:
		at := len(c.out)
		c.out = append(c.out, p...)
		for i, b := range c.out[at:] {
			if b == '\n' || b == '\r' {
				c.out[at+i] = ' '
			}
		}
	default:
		c.out = append(c.out, p...)
	}
	c.out = append(c.out, '\n')
}

// kickLocked wakes the writer unless it is already at work. c.mu is held.
func (c *lineConn) kickLocked() {
	if c.active {
		return
	}
	c.active = true
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Queued reports the bytes of lines waiting to be written.
func (c *lineConn) Queued() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// writeLoop is the writer goroutine: woken when something is queued, it
// writes until nothing is.
func (c *lineConn) writeLoop() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		if !c.drain() {
			return
		}
	}
}

// drain writes the queue until it is empty, each pass taking all of it. It
// returns false once the writer must stop: the close finished or a write
// failed.
func (c *lineConn) drain() bool {
	for {
		b, closing := c.take()
		if b == nil {
			if closing {
				c.finishClose()
				return false
			}
			return true
		}
		_, err := c.nc.Write(b)
		c.written(b)
		if err != nil {
			c.opts.Log.Debug("write to tcp app failed", zap.Error(err))
			c.Abort()
			return false
		}
	}
}

// take swaps the queue for the spare buffer. With nothing queued it marks
// the writer idle and reports whether the app is closing.
func (c *lineConn) take() (b []byte, closing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 {
		c.active = false
		return nil, c.closing
	}
	b = c.out
	c.out, c.spare = c.spare[:0], nil
	return b, false
}

// written frees b's bytes in the queue, keeps b for reuse unless a backlog
// grew it large, and wakes a blocked Send.
func (c *lineConn) written(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued -= int64(len(b))
	if cap(b) <= maxRetainedLineBuffer {
		c.spare = b[:0]
	}
	if c.waiting {
		close(c.space)
		c.space = make(chan struct{})
		c.waiting = false
	}
}

// ---- closing ----

// Close writes what is queued, then closes the app's socket (see
// finishClose). tcp:// has no close frame: code and reason, what a
// WebSocket app would have got, are logged instead. It does not block;
// Done is closed when it has finished. Later calls do nothing.
func (c *lineConn) Close(code ws.StatusCode, reason string) {
	if !c.shutdown() {
		return
	}
	log := c.opts.Log.Info
	if code == ws.StatusNormalClosure && reason == "" {
		log = c.opts.Log.Debug // the session's end after the app left
	}
	log("closing tcp app: queued lines are written, then the socket is closed (tcp:// has no close frame)",
		zap.Int("close_code", int(code)), zap.String("close_reason", reason))
}

// shutdown stops queueing and has the writer finish the close. It reports
// whether this call started it.
func (c *lineConn) shutdown() bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	c.closing = true
	c.closed.Store(true)
	c.kickLocked()
	c.mu.Unlock()
	// An app that stopped reading must not hold the close up for ever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.CloseWait))
	return true
}

// finishClose runs on the writer once the queue is written: it half-closes,
// so the app reads everything and then EOF, and waits up to CloseWait for
// the app to close its side before closing the socket. Closing a socket
// with unread bytes in it sends RST, which can destroy the lines the app has
// not read yet (RFC 9112 §9.6): so when the reader stopped on a broken rule,
// what the app still sends is read and discarded meanwhile.
func (c *lineConn) finishClose() {
	deadline := time.Now().Add(c.opts.CloseWait)
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.readDone:
		if c.violated.Load() {
			_ = c.nc.SetReadDeadline(deadline)
			_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, lingerBytes))
		}
	case <-t.C:
	case <-c.quit:
	}
	c.Abort()
}

// Abort closes the socket at once: the session's end was forced
// (shutdown deadline), or a write failed.
func (c *lineConn) Abort() {
	c.abortOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.closed.Store(true)
		c.mu.Unlock()
		close(c.quit)
		_ = c.nc.Close()
	})
}

// Done is closed once the writer has exited and the socket is closed.
func (c *lineConn) Done() <-chan struct{} { return c.done }
