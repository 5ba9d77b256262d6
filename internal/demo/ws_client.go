package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

const (
	// subMessage is what the client sends once, right after connecting. The
	// id is a request id: the feed's answer carries it back.
	subMessage = `{"t":"sub","channel":"prices","id":1}`
	// clientDialTimeout covers tether's TETHER_ACCEPT_WAIT: tether dials the
	// upstream before it answers the client's handshake.
	clientDialTimeout = 5 * time.Second
	// clientWriteTimeout bounds one write to tether.
	clientWriteTimeout = 2 * time.Second
	// clientCloseWait is how long Close waits for tether's close echo.
	clientCloseWait = 3 * time.Second
	// clientMaxMessage bounds one message: the feed's are tiny.
	clientMaxMessage = 1 << 20
)

// client is the WebSocket demo's naive app: it connects to tether once,
// sends one subscription, then only reads. It never reconnects: if its
// socket closes, it is done, and the demo says so. Its ledger tracks event
// numbers the way a careful app would, to show what each outage cost.
//
// One goroutine reads; wsconn's writer writes (the subscription, pongs, the
// close). Stats, Close and Done are safe for concurrent use.
type client struct {
	ws *wsconn.Conn
	*ledger
	closing atomic.Bool   // Close has started: the socket's end is ours
	done    chan struct{} // closed when the reader has returned
	once    sync.Once
}

// dialClient connects to tether at url, sends the subscription and starts
// reading a feed of rate events per second.
func dialClient(ctx context.Context, url string, rate int, n *narrator) (*client, error) {
	conn, br, _, err := ws.Dialer{Timeout: clientDialTimeout}.Dial(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("client: connect to tether: %w", err)
	}
	c := &client{
		ws: wsconn.New(conn, br, wsconn.Options{
			Client:          true,
			MaxMessageBytes: clientMaxMessage,
			WriteTimeout:    clientWriteTimeout,
			CloseWait:       clientCloseWait,
		}),
		ledger: newLedger(n, rate),
		done:   make(chan struct{}),
	}
	if br != nil {
		ws.PutReader(br) // wsconn.New has taken what tether sent behind its 101
	}
	if err := c.ws.Send(ctx, ws.OpText, []byte(subMessage)); err != nil {
		c.ws.Abort()
		<-c.ws.Done()
		return nil, fmt.Errorf("client: send subscription: %w", err)
	}
	go c.readLoop()
	return c, nil
}

// Done is closed once the client's socket has ended.
func (c *client) Done() <-chan struct{} { return c.done }

// Close closes the socket with 1000, waits up to clientCloseWait for
// tether's echo, and waits for the reader. It is idempotent.
func (c *client) Close() {
	c.once.Do(func() {
		c.closing.Store(true)
		c.ws.Close(ws.StatusNormalClosure, "")
		<-c.done
		<-c.ws.Done()
	})
}

// readLoop is the client's only reader.
func (c *client) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if !c.closing.Load() {
				c.lost(err)
			}
			return
		}
		c.message(data, "")
	}
}

// lost records a socket that ended without the client asking: for an app
// behind tether, that must never happen. wsconn has already echoed a close
// frame, as RFC 6455 section 5.5.1 asks.
func (c *client) lost(err error) {
	var ce *wsconn.CloseError
	if errors.As(err, &ce) && ce.Reason != "" {
		err = fmt.Errorf("tether closed the socket with %d %q", ce.Code, ce.Reason)
	} else if errors.As(err, &ce) {
		err = fmt.Errorf("tether closed the socket with %d", ce.Code)
	} else {
		err = fmt.Errorf("the socket failed: %w", err)
	}
	c.ended(err.Error())
	c.say("!!! %s. This naive client never reconnects; behind tether it should never have to. That is a tether bug.", err)
}
