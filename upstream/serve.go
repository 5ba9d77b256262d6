package upstream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// connEvent is what a connection's reader reports: a confirmation, or its end.
type connEvent struct {
	confirmed bool
	err       error
}

// serve runs one open connection until it is lost or ctx ends, and returns why it
// ended. The reader and restore goroutines it starts have exited when it returns.
func (c *Client) serve(ctx context.Context, conn *Conn) error {
	c.setState(StateOpen)
	c.log.Info("upstream connected", zap.Uint64("gen", conn.gen),
		zap.Int("attempt", c.failures), zap.String("protocol", conn.protocol))
	cctx, cancel := context.WithCancel(ctx)
	events := make(chan connEvent, 2) // at most one confirmation and one end
	restored := make(chan error, 1)
	var busy atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.read(conn, events, &busy) }()
	go func() { defer wg.Done(); restored <- c.opts.Handler.Restore(cctx, conn) }()

	confirmed, err := c.watch(ctx, conn, events, restored, &busy)
	cancel()
	conn.ws.Close(ws.StatusNormalClosure, "") // no-op when already closing
	<-conn.ws.Done()                          // bounded by wsconn's CloseWait
	wg.Wait()
	c.setState(StateLost)
	if confirmed {
		c.lostAt = c.opts.now()
	}
	c.opts.Handler.Lost(conn, err)
	if ctx.Err() == nil {
		c.opts.Observer.Lost(lossReason(err))
	}
	return err
}

// watch is the per-connection part of the state machine: confirmation, restore
// result, heartbeat. It returns whether the connection was confirmed and why it
// ended.
func (c *Client) watch(ctx context.Context, conn *Conn, events <-chan connEvent,
	restored <-chan error, busy *atomic.Bool) (bool, error) {
	hb := heartbeat{interval: c.opts.PingInterval, timeout: c.opts.PingTimeout}
	hbTimer := newTimer(hb.interval)
	defer hbTimer.stop()
	stable := newTimer(0)
	if c.opts.Confirm == nil {
		stable = newTimer(max(c.opts.StableAfter, time.Nanosecond))
	}
	defer stable.stop()
	confirmed := false
	confirm := func() {
		if !confirmed {
			confirmed = true
			c.confirmed(conn)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return confirmed, ErrClosed
		case ev := <-events:
			if ev.err != nil {
				return confirmed, ev.err
			}
			confirm()
		case err := <-restored:
			restored = nil
			if err != nil && ctx.Err() != nil {
				// Restore saw the Client's own shutdown through its context;
				// select may pick this case before ctx.Done.
				return confirmed, ErrClosed
			}
			if err != nil {
				return confirmed, &restoreError{err: err}
			}
		case <-stable.c():
			confirm()
		case <-hbTimer.c():
			action, next := hb.next(time.Now(), conn.ws.LastRead(), busy.Load())
			switch action {
			case beatDead:
				conn.ws.Abort()
				return confirmed, ErrHeartbeatTimeout
			case beatProbe:
				c.probe(ctx, conn)
			}
			hbTimer.reset(next)
		}
	}
}

// read is the connection's reader goroutine.
func (c *Client) read(conn *Conn, events chan<- connEvent, busy *atomic.Bool) {
	confirm := c.opts.Confirm
	for {
		op, data, err := conn.ws.ReadMessage()
		if err != nil {
			events <- connEvent{err: readError(err)}
			return
		}
		if c.opts.HeartbeatReply != nil && c.opts.HeartbeatReply(data) {
			continue
		}
		if confirm != nil && confirm(data) {
			events <- connEvent{confirmed: true}
			confirm = nil
		}
		busy.Store(true)
		c.opts.Handler.Message(conn, op, data)
		conn.ws.Touch() // time spent blocked on the app was not silence
		busy.Store(false)
	}
}

// readError maps wsconn's errors to the package's: the upstream's close frame
// becomes *CloseError, and an oversized upstream message becomes a 1009 close
// naming the limit, so the app learns why (DESIGN.md "Limits").
func readError(err error) error {
	var ce *wsconn.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: int(ce.Code), Reason: ce.Reason}
	}
	var pe *wsconn.ProtocolError
	if errors.As(err, &pe) && pe.Code == ws.StatusMessageTooBig {
		return &CloseError{Code: int(pe.Code), Reason: "upstream message exceeds TETHER_MAX_MESSAGE_BYTES"}
	}
	return err
}

// timer is a time.Timer whose zero duration means "never fires".
type timer struct{ t *time.Timer }

func newTimer(d time.Duration) timer {
	if d <= 0 {
		return timer{}
	}
	return timer{t: time.NewTimer(d)}
}

func (t timer) c() <-chan time.Time {
	if t.t == nil {
		return nil
	}
	return t.t.C
}

func (t timer) reset(d time.Duration) {
	if t.t != nil {
		t.t.Reset(d)
	}
}

func (t timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
}
