package transport

import (
	"bytes"
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

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// LineConn is a tcp:// app's socket, seen by its session as the app side
// of a WebSocket: each line the app writes is one text message, each
// message to the app is written as one line.
//
// Reading: a line ends with "\n"; a "\r" right before it is dropped too, so
// "\r\n" works. The line is read into one reusable buffer, which grows as a
// long line arrives up to MaxLineBytes (plus the terminator) and is released
// once it outgrows maxRetainedLineBuffer; a longer line stops the reader
// without sending anything (*LineError, the app is closed as a WebSocket
// app would be with 1009). An empty line is skipped: apps send them as
// keep-alives, and an empty text message means nothing to a WebSocket
// server. A line that is not UTF-8 closes the app (a text message must be,
// RFC 6455 §8.1; 1007 for a WebSocket app). Bytes after the last newline
// when the app disconnects are not sent (*PartialLineError): a message cut
// off by a crash must not pass for a whole one.
//
// Writing: as wsconn's, one writer takes the whole queue at once, so a lone
// message costs one write and a backlog few large ones. The writer is the
// caller that queued a burst for an idle writer: it writes inline, with
// writes that never wait (sendq.RawWriter), and what the socket does not
// take at once goes to the writer goroutine, as does the close; the queue
// (a sendq.Queue) holds at most QueueBytes of encoded lines and Send and
// SendBatch block beyond, which is the back-pressure on upstream reads.
// Append encodes lines into a batch outside the lock, SendBatch queues them
// under one. Binary messages and text holding a line break follow
// LineOptions.Binary and Newline: a line never carries a raw newline, so
// the app's stream cannot be split wrongly.
//
// Closing: there is no close frame. Close writes what is queued, half-closes
// (FIN), waits up to CloseWait for the app to close its side, then closes
// the socket; the code and reason a WebSocket app would have got are logged.
//
// Concurrency: ReadMessage is called from one goroutine (the session's
// reader); Send, SendBatch, Close, Abort, Done and Queued are safe for
// concurrent use; Append is called by the batch's goroutine.
type LineConn struct {
	nc   net.Conn
	opts LineOptions

	// Reader state, touched only by the reading goroutine. The unread bytes
	// are rbuf[rpos:rend]; the first scanned of them hold no newline.
	rbuf       []byte
	rpos, rend int
	scanned    int
	readErr    error
	// long is what rbuf holds beyond maxRetainedLineBuffer, counted on
	// Options.Account (countLong) until the buffer is let go.
	long int64

	readDone chan struct{} // closed when the reader has stopped for good
	readOnce sync.Once
	violated atomic.Bool // the reader stopped on a rule the app broke, the socket is still open

	wake      chan struct{} // one slot: something was queued for an idle writer
	quit      chan struct{} // closed by Abort
	done      chan struct{} // closed when the writer has exited and the socket is closed
	abortOnce sync.Once

	// mu guards the queue: q counts the encoded lines in out against
	// QueueBytes, and is closed once Close or Abort was called, after which
	// nothing more is queued.
	mu    sync.Mutex
	q     sendq.Queue
	out   []byte // encoded lines waiting to be written
	spare []byte // the writer's last buffer, reused for the next queue
	woken bool   // the queueing in this critical section made its caller the writer

	// The writer's own state, owned by whoever is the writer (a caller
	// writing inline, then the writer goroutine it kicked): pend is a
	// buffer taken from the queue and written up to pendOff, left to the
	// goroutine; raw is the socket's inline write, looked for once
	// (probed).
	pend    []byte
	pendOff int
	raw     *sendq.RawWriter
	probed  bool

	warned [2]atomic.Bool // first drop by policy logged: [0] binary, [1] newline
}

// LineOptions configures a LineConn. Zero sizes take wsconn's defaults.
type LineOptions struct {
	MaxLineBytes int64 // longest line from the app, terminator excluded
	QueueBytes   int64 // encoded bytes queued towards the app before Send blocks
	CloseWait    time.Duration
	Binary       BinaryPolicy
	Newline      NewlinePolicy
	Log          *zap.Logger
	Dropped      func(reason string) // a message not forwarded, by Drop* reason
	Delivered    func()              // a message queued towards the app
	Account      *budget.Account     // the memory budget's account of the session (sendq.Options.Account); nil: none
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

// NewLineConn wraps an accepted tcp:// app's socket and starts its writer
// goroutine; the caller must eventually call Close or Abort, and may wait
// for Done.
func NewLineConn(nc net.Conn, opts LineOptions) *LineConn {
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
	c := &LineConn{
		nc:       nc,
		opts:     opts,
		readDone: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.q.Init(&c.mu, sendq.Options{Limit: opts.QueueBytes, Closed: ErrLineClosed, Wake: c.wakeWriter, Account: opts.Account})
	go c.writeLoop()
	return c
}

// ReadMessage returns the next non-empty line as a text message, without
// its terminator. It is valid until the next call. After a broken rule it
// returns *LineError (the app is being closed); after the app disconnected
// inside a line, *PartialLineError; otherwise the socket's error (io.EOF
// when the app closed). Every later call returns the same error.
func (c *LineConn) ReadMessage() (ws.OpCode, []byte, error) {
	if c.readErr != nil {
		return 0, nil, c.readErr
	}
	for {
		line, err := c.readLine()
		if err == nil && len(line) == 0 {
			continue // a keep-alive, not a message
		}
		if err == nil && !utf8.Valid(line) {
			err = &LineError{Code: ws.StatusInvalidFramePayloadData, Reason: "line is not valid UTF-8", Drop: DropInvalidUTF8}
		}
		if err != nil {
			c.readErr = err
			c.rbuf = nil // nothing more is read: the buffer goes, and its count
			c.countLong()
			c.readFailed(err)
			return 0, nil, err
		}
		return ws.OpText, line, nil
	}
}

// readLine returns the next line, "\r\n" or "\n" cut off.
func (c *LineConn) readLine() ([]byte, error) {
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
				return nil, &PartialLineError{Bytes: c.scanned}
			}
			return nil, err
		}
	}
}

func (c *LineConn) tooLong() error {
	return &LineError{
		Code:   ws.StatusMessageTooBig,
		Reason: fmt.Sprintf("line exceeds the size limit (TETHER_MAX_MESSAGE_BYTES=%d)", c.opts.MaxLineBytes),
		Drop:   DropTooLarge,
	}
}

// release lets go of a read buffer a long line grew, once it is empty.
func (c *LineConn) release() {
	if c.rpos != c.rend {
		return
	}
	c.rpos, c.rend = 0, 0
	if len(c.rbuf) > maxRetainedLineBuffer {
		c.rbuf = nil
		c.countLong()
	}
}

// countLong counts on Options.Account what the read buffer holds beyond
// the maxRetainedLineBuffer every connection may keep: a long line being
// read (docs/design.md "Memory"). Like wsconn's reassembly it never waits,
// even on a full budget: only reading the rest of the line frees it, and
// MaxLineBytes bounds it; the queue the line goes to waits instead.
func (c *LineConn) countLong() {
	a := c.opts.Account
	if a == nil {
		return
	}
	want := max(0, int64(len(c.rbuf))-maxRetainedLineBuffer)
	switch {
	case want > c.long:
		a.Reserve(want - c.long)
	case want < c.long:
		a.Release(c.long - want)
	}
	c.long = want
}

// fill reads more bytes after rbuf[rend], making room first.
func (c *LineConn) fill() error {
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
func (c *LineConn) makeRoom() {
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
	c.countLong()
}

// readFailed records that the reader stopped. After a broken rule the
// socket is still open: the app is closed, and the writer drains what the
// app still sends before closing the socket (see finishClose).
func (c *LineConn) readFailed(err error) {
	var le *LineError
	if errors.As(err, &le) {
		c.violated.Store(true)
		c.readOnce.Do(func() { close(c.readDone) })
		c.shutdown() // logged by the session, with the code and reason
		return
	}
	c.readOnce.Do(func() { close(c.readDone) })
}
