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
	var progress atomic.Uint64 // a readerProgress
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.read(conn, events, &progress) }()
	go func() { defer wg.Done(); restored <- c.opts.Handler.Restore(cctx, conn) }()

	confirmed, err := c.watch(ctx, conn, events, restored, &progress)
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
	restored <-chan error, progress *atomic.Uint64) (bool, error) {
	hb := heartbeat{interval: c.opts.PingInterval, timeout: c.opts.PingTimeout, woke: time.Now()}
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
			// Progress first: a message handed over between the two loads
			// then counts as moved at the next wake-up, not lost.
			p := readerProgress(progress.Load())
			action, next := hb.next(time.Now(), conn.ws.LastRead(), p)
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

// flusher is a Handler that may hold back what Message gave it while more
// messages wait in the read buffer, to pass them on together (proxy.Session
// does, to the app socket). The reader calls Flush before every read that may
// wait for the socket, and before it stops, so nothing is held back while
// tether waits. Like Message, Flush may block: that is backpressure too.
type flusher interface {
	Flush(c *Conn)
}

// read is the connection's reader goroutine. It marks each message it hands to
// the Handler in progress (readerProgress), so the heartbeat does not take time
// spent blocked on the app for silence; a Flush counts as a message.
func (c *Client) read(conn *Conn, events chan<- connEvent, progress *atomic.Uint64) {
	confirm := c.opts.Confirm
	flush := flushFunc(c.opts.Handler, conn, progress)
	for {
		op, data, err := conn.ws.ReadMessageFlushing(flush)
		if err != nil {
			if flush != nil {
				flush()
			}
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
		progress.Add(1) // busy
		c.opts.Handler.Message(conn, op, data)
		progress.Add(1) // one more message handed over, not busy
	}
}

// flushFunc returns the call of h's Flush for conn, marked in progress like
// a message (Flush may block on the app), or nil when h has none. It is
// built here, not in read, to keep read's frame small: the reader of an
// idle connection parks at the bottom of a deep call chain, and a larger
// frame there took its stack from 2 to 4 KiB, on every connection.
//
//go:noinline
func flushFunc(h Handler, conn *Conn, progress *atomic.Uint64) func() {
	fl, ok := h.(flusher)
	if !ok {
		return nil
	}
	return func() {
		progress.Add(1)
		fl.Flush(conn)
		progress.Add(1)
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
