package upstream

import (
	"context"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Conn is one upstream connection of a Client, handed to the Handler. It is safe
// for concurrent use. A Conn that has been lost refuses Send with
// wsconn.ErrClosed; a newer Conn has a higher Gen.
type Conn struct {
	gen      uint64
	protocol string
	ws       *wsconn.Conn
}

// Gen is the connection's generation: 1 for the first connection of a Client,
// then rising by one per connection.
func (c *Conn) Gen() uint64 { return c.gen }

// Protocol is the subprotocol the upstream selected ("" when none).
func (c *Conn) Protocol() string { return c.protocol }

// Send queues one message to the upstream; data is copied. It blocks while the
// connection's write queue is full, until ctx ends or the connection is lost.
func (c *Conn) Send(ctx context.Context, op ws.OpCode, data []byte) error {
	return c.ws.Send(ctx, op, data)
}

// SendText is Send for a text message.
func (c *Conn) SendText(ctx context.Context, data []byte) error {
	return c.ws.Send(ctx, ws.OpText, data)
}
