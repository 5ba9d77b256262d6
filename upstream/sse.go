package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// sseConn is the transport of an SSE upstream: one text/event-stream
// response body, parsed by sse.Reader, each event handed on as one text
// message in the configured format. Comments, retry fields and id-only
// blocks only count as liveness (any bytes do, see arrivals).
//
// Concurrency: ReadMessage, ReadMessageFlushing and the stream state read
// after the reader stopped (lastEventID, retry) belong to the reader
// goroutine and whoever waited for it (id, Conn.EventID, to the reader
// alone); Send, Ping, Close, Abort, Done and LastRead are safe from
// any goroutine.
type sseConn struct {
	cancel context.CancelFunc // ends the request: unblocks a Read, frees the socket
	body   io.ReadCloser
	in     *arrivals
	r      *sse.Reader
	format SSEFormat

	msg []byte // the message last returned, reused
	id  string // the id of the event msg was made of (Conn.EventID)

	done chan struct{}
	once sync.Once
}

// keepMessageCap is the largest message buffer kept for the next event:
// one huge event must not pin its size for the rest of a long stream.
const keepMessageCap = 64 << 10

// newSSEConn wraps a response body already checked to be an event stream,
// with the format and limit opts set; the event being parsed counts on acct
// (the Client's Session.Account). lastEventID is the ID the request resumed
// from: the stream starts with it, as a browser's EventSource does
// (sse.Options.LastEventID).
func newSSEConn(body io.ReadCloser, cancel context.CancelFunc, opts *Options, acct *budget.Account, lastEventID string) *sseConn {
	in := &arrivals{src: body}
	in.touch()
	return &sseConn{
		cancel: cancel,
		body:   body,
		in:     in,
		r: sse.NewReader(in, sse.Options{
			MaxEventSize: eventLimit(opts.MaxMessageBytes),
			LastEventID:  lastEventID,
			Held:         eventHeld(acct),
		}),
		format: opts.SSEFormat,
		done:   make(chan struct{}),
	}
}

// eventHeld counts the event being parsed on the session's account, as a
// WebSocket connection counts the message it reassembles (docs/design.md
// "Memory"): from its first byte until it is dispatched, never waiting, since
// only reading on frees it. The parser gives everything back once it stops,
// which it does when the connection ends (Abort ends its read).
func eventHeld(a *budget.Account) func(int64) {
	if a == nil {
		return nil
	}
	return func(d int64) {
		if d > 0 {
			a.Reserve(d)
		} else {
			a.Release(-d)
		}
	}
}

// eventLimit converts MaxMessageBytes to the parser's limit: 0 means the
// same default as a WebSocket upstream's.
func eventLimit(maxEvent int64) int {
	if maxEvent <= 0 {
		return wsconn.DefaultMaxMessageBytes
	}
	return int(min(maxEvent, int64(^uint(0)>>1)))
}

// ReadMessage returns the next event as a text message, skipping what only
// proves the stream alive.
func (c *sseConn) ReadMessage() (ws.OpCode, []byte, error) {
	if cap(c.msg) > keepMessageCap {
		c.msg = nil
	}
	for {
		it, err := c.r.Next()
		if err != nil {
			return 0, nil, sseReadError(err)
		}
		if it.Kind == sse.KindEvent {
			c.msg = c.format.appendMessage(c.msg[:0], it.Event)
			c.id = it.Event.ID
			return ws.OpText, c.msg, nil
		}
	}
}

// sseReadError names why a stream ended. An event over the limit becomes a
// 1009 close, as an oversized WebSocket message does, so the close-code
// policy decides and the app learns why (docs/design.md "Limits"). A clean end
// of the body is the server closing the stream, which EventSource answers
// by reconnecting, and so does tether.
func sseReadError(err error) error {
	var tl *sse.TooLargeError
	switch {
	case errors.As(err, &tl):
		return &CloseError{Code: int(ws.StatusMessageTooBig), Reason: "upstream event exceeds TETHER_MAX_MESSAGE_BYTES"}
	case errors.Is(err, io.EOF):
		return fmt.Errorf("upstream ended the event stream: %w", err)
	}
	return err
}

// ReadMessageFlushing is ReadMessage that calls flush (when not nil) before
// it reads the body, which may wait for the network: a reader that holds
// messages back to pass them on together must not sit on them while the
// stream is quiet. Events the parser already holds are returned without it.
func (c *sseConn) ReadMessageFlushing(flush func()) (ws.OpCode, []byte, error) {
	c.in.flush = flush
	op, p, err := c.ReadMessage()
	c.in.flush = nil
	return op, p, err
}

// Send refuses: an event stream has no way back to the server.
func (c *sseConn) Send(context.Context, ws.OpCode, []byte) error { return ErrReadOnly }

// Frame is nil: an event is no WebSocket frame.
func (c *sseConn) Frame() []byte { return nil }

// Append and AppendFrame count a message QueueBatch then refuses: nothing
// is sent on an SSE upstream.
func (c *sseConn) Append(b *sendq.Batch, _ ws.OpCode, _ []byte) { b.Add() }

func (c *sseConn) AppendFrame(b *sendq.Batch, _ []byte) bool {
	b.Add()
	return false
}

// QueueBatch returns ErrReadOnly, leaving b as it is.
func (c *sseConn) QueueBatch(context.Context, *sendq.Batch) error { return ErrReadOnly }

// Ping does nothing: SSE has no probe. The heartbeat's timeout then
// declares a stream dead after PingInterval + PingTimeout of silence.
func (c *sseConn) Ping([]byte) error { return nil }

// Close ends the request; there is no closing handshake to wait for.
func (c *sseConn) Close(ws.StatusCode, string) { c.Abort() }

// Abort cancels the request, which closes its socket and so unblocks a
// reader waiting in Read, then releases the body. Later calls do nothing.
func (c *sseConn) Abort() {
	c.once.Do(func() {
		c.cancel()
		_ = c.body.Close()
		close(c.done)
	})
}

// Done is closed once Close or Abort has ended the request.
func (c *sseConn) Done() <-chan struct{} { return c.done }

// LastRead is when the body last delivered bytes.
func (c *sseConn) LastRead() time.Time { return c.in.last() }

// WriteProgress: tether writes nothing on an event stream.
func (c *sseConn) WriteProgress() (uint64, bool, bool) { return 0, false, false }

// Unread is 0: net/http keeps the response's socket to itself, so what
// waits below the body is not known.
func (c *sseConn) Unread() int { return 0 }

// Unwritten is false: an event stream writes nothing after its request.
func (c *sseConn) Unwritten() bool { return false }

// ControlDropped: an event stream has no pings.
func (c *sseConn) ControlDropped() uint64 { return 0 }

// lastEventID is the stream's last event ID string: what the next request
// sends as Last-Event-ID. Only after the reader has stopped.
func (c *sseConn) lastEventID() string { return c.r.LastEventID() }

// retry is the stream's latest valid "retry" value, if it sent one. Only
// after the reader has stopped.
func (c *sseConn) retry() (time.Duration, bool) { return c.r.Retry() }

// arrivals stamps the time of every read that returned bytes: comments and
// partial events prove the stream alive as much as whole events do. One
// clock read per read of the body, not per event.
type arrivals struct {
	src   io.Reader
	at    atomic.Int64 // nanoseconds since clockEpoch
	flush func()       // called once before the next read; reader goroutine only
}

// clockEpoch anchors arrivals' stamps on the monotonic clock.
var clockEpoch = time.Now()

func (a *arrivals) Read(p []byte) (int, error) {
	if f := a.flush; f != nil {
		a.flush = nil
		f()
	}
	n, err := a.src.Read(p)
	if n > 0 {
		a.touch()
	}
	return n, err
}

func (a *arrivals) touch() { a.at.Store(int64(time.Since(clockEpoch))) }

func (a *arrivals) last() time.Time { return clockEpoch.Add(time.Duration(a.at.Load())) }
