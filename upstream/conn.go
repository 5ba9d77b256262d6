package upstream

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
)

// Kind is the protocol spoken to the upstream (TETHER_UPSTREAM_KIND).
type Kind int

const (
	// KindWebSocket: a WebSocket upstream (ws://, wss://), both directions.
	KindWebSocket Kind = iota
	// KindSSE: a Server-Sent Events upstream (http://, https://): an HTTP GET
	// answered with a text/event-stream body, read only.
	KindSSE
)

var kindNames = [...]string{KindWebSocket: "websocket", KindSSE: "sse"}

// String returns the name ParseKind accepts.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind parses "websocket" or "sse", ignoring case and surrounding space.
func ParseKind(s string) (Kind, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for k, name := range kindNames {
		if v == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown upstream kind %q: want websocket or sse", s)
}

// UnmarshalText implements encoding.TextUnmarshaler for configuration parsers.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// transport is what a Conn runs on: a WebSocket connection (*wsconn.Conn) or
// an event stream (*sseConn). One goroutine, the connection's reader, calls
// ReadMessage and ReadMessageFlushing; the other methods are safe for
// concurrent use. The Client's serve loop, heartbeat and Probe use only these methods,
// so one state machine serves both protocols.
type transport interface {
	// ReadMessage returns the next data message; it is valid until the next
	// call. Errors are final.
	ReadMessage() (ws.OpCode, []byte, error)
	// ReadMessageFlushing is ReadMessage that calls flush, when not nil,
	// before it may wait for the network.
	ReadMessageFlushing(flush func()) (ws.OpCode, []byte, error)
	// Send queues a message for the upstream.
	Send(ctx context.Context, op ws.OpCode, p []byte) error
	// Frame is the frame the message ReadMessage returned last arrived
	// in, when it is passed on as it is (wsconn.Conn.Frame); nil when
	// there is none. Only the reader calls it.
	Frame() []byte
	// Append and AppendFrame encode a message, or add a frame as it is,
	// into a batch SendBatch queues (wsconn.Conn's).
	Append(b *sendq.Batch, op ws.OpCode, p []byte)
	AppendFrame(b *sendq.Batch, frame []byte) bool
	QueueBatch(ctx context.Context, b *sendq.Batch) error
	// Ping probes a quiet connection; any inbound bytes answer it.
	Ping(p []byte) error
	// Close ends the connection politely, Abort at once; Done is closed
	// when it has ended.
	Close(code ws.StatusCode, reason string)
	Abort()
	Done() <-chan struct{}
	// LastRead is when bytes last arrived (monotonic).
	LastRead() time.Time
	// WriteProgress is the peer's acknowledgement count of what was written
	// and whether a backlog waits behind it (wsconn.Conn.WriteProgress); ok
	// is false when the system does not say.
	WriteProgress() (acked uint64, backlog, ok bool)
	// Unread is how many bytes have arrived and wait unread below the
	// reader (the kernel's receive queue; wsconn.Conn.Unread), 0 when none
	// or when the system does not say.
	Unread() int
	// Unwritten reports frames waiting in the transport's own queue while
	// the kernel's send queue is empty (wsconn.Conn.Unwritten): the writer
	// has not run since they were queued. False when the system does not say.
	Unwritten() bool
	// ControlDropped counts the pings left unanswered because they came
	// faster than the writer answered them.
	ControlDropped() uint64
}

// Conn is one upstream connection of a Client, handed to the Handler. It is safe
// for concurrent use. A Conn that has been lost refuses Send with
// wsconn.ErrClosed; a newer Conn has a higher Gen. A Conn of an SSE upstream
// refuses every Send with ErrReadOnly.
type Conn struct {
	gen      uint64
	protocol string
	remote   string // the address dialled, for logs: a name may resolve elsewhere on each dial
	// compressed: the upstream accepted permessage-deflate.
	compressed bool
	// ws is the transport, named after the protocol the package began with:
	// a *wsconn.Conn, or an *sseConn for an SSE upstream.
	ws transport
	// loggedIn: the app's login went out on the connection
	// (Options.HeartbeatAfterLogin).
	loggedIn atomic.Bool
}

// LoggedIn records that the app's login went out on c: from now on its
// heartbeat probe may be Options.HeartbeatMessage. Safe for concurrent use.
func (c *Conn) LoggedIn() { c.loggedIn.Store(true) }

// Gen is the connection's generation: 1 for the first connection of a Client,
// then rising by one per connection.
func (c *Conn) Gen() uint64 { return c.gen }

// Compressed reports whether the upstream accepted permessage-deflate for
// this connection (Options.Compression).
func (c *Conn) Compressed() bool { return c.compressed }

// Protocol is the subprotocol the upstream selected ("" when none, and always
// for an SSE upstream).
func (c *Conn) Protocol() string { return c.protocol }

// Send queues one message to the upstream; data is copied. It blocks while the
// connection's write queue is full, until ctx ends or the connection is lost.
// On an SSE upstream it returns ErrReadOnly at once.
func (c *Conn) Send(ctx context.Context, op ws.OpCode, data []byte) error {
	return c.ws.Send(ctx, op, data)
}

// EventID is, for an SSE upstream, the id of the event the message being
// handed to Handler.Message was made of: the stream's last event ID when
// it was dispatched, "" when there is none (the id the json format's
// message carries). It is "" for a WebSocket upstream. Only the
// connection's reader may call it, within Message: the next event
// replaces it.
func (c *Conn) EventID() string {
	if sc, ok := c.ws.(*sseConn); ok {
		return sc.id
	}
	return ""
}

// SendText is Send for a text message.
func (c *Conn) SendText(ctx context.Context, data []byte) error {
	return c.ws.Send(ctx, ws.OpText, data)
}

// Frame returns the frame the message being handed to Handler.Message
// arrived in, header included, as the upstream sent it, for a handler that
// forwards the message unchanged: nil when it did not arrive as one whole
// frame read in place, and always for an SSE upstream. Only the
// connection's reader may call it, within Message, like EventID.
func (c *Conn) Frame() []byte { return c.ws.Frame() }

// Append encodes one message into b for this connection, copying data, as
// Send would (masked, compressed when Send compresses it). SendBatch queues
// b: a reader forwarding a burst of app messages takes the connection's
// lock once and wakes its writer once for all of them.
func (c *Conn) Append(b *sendq.Batch, op ws.OpCode, data []byte) { c.ws.Append(b, op, data) }

// AppendFrame adds frame, a whole data frame as the app sent it
// (wsconn.Conn.Frame), to b as it is when the connection would send those
// very bytes, and encodes its payload again otherwise (a payload the
// connection compresses); it reports whether the frame went as it is. The
// frame is the connection's after the call (it may be unmasked in place).
func (c *Conn) AppendFrame(b *sendq.Batch, frame []byte) bool { return c.ws.AppendFrame(b, frame) }

// SendBatch queues what b holds, and empties b, blocking as Send does.
// With an error (the connection is lost, or ctx ended) it queued none of
// b's messages, and b still holds them: the caller takes them back
// (wsconn.NextFrame, wsconn.FrameMessage) or drops them. On an SSE upstream
// it returns ErrReadOnly.
func (c *Conn) SendBatch(ctx context.Context, b *sendq.Batch) error {
	return c.ws.QueueBatch(ctx, b)
}
