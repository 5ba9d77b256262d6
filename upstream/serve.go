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
		zap.Int("attempt", c.failures), zap.String("protocol", conn.protocol), zap.String("remote", conn.remote),
		zap.Bool("compressed", conn.compressed))
	cctx, cancel := context.WithCancel(ctx)
	// Taken before the reader starts: a resume after the connection's
	// first message is this connection's to probe.
	resumed := c.opts.Resume.C()
	events := make(chan connEvent, 2) // at most one confirmation and one end
	restored := make(chan error, 1)
	var progress atomic.Uint64 // a readerProgress
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.read(conn, events, &progress) }()
	go func() { defer wg.Done(); restored <- c.opts.Handler.Restore(cctx, conn) }()

	confirmed, err := c.watch(ctx, conn, connSignals{events: events, restored: restored, resumed: resumed}, &progress)
	cancel()
	conn.ws.Close(ws.StatusNormalClosure, "") // no-op when already closing
	<-conn.ws.Done()                          // bounded by wsconn's CloseWait
	wg.Wait()
	if n := conn.ws.ControlDropped(); n > 0 {
		c.log.Warn("upstream sent pings faster than tether answered them; only the latest were answered",
			zap.Uint64("gen", conn.gen), zap.Uint64("pings_unanswered", n))
	}
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

// connSignals are what the watch of one connection waits on besides its
// timers: the reader's events, the restore result, resumes from sleep.
type connSignals struct {
	events   <-chan connEvent
	restored <-chan error
	resumed  <-chan struct{}
}

// watch is the per-connection part of the state machine: confirmation, restore
// result, heartbeat, resumes. It returns whether the connection was confirmed
// and why it ended.
func (c *Client) watch(ctx context.Context, conn *Conn, sig connSignals, progress *atomic.Uint64) (bool, error) {
	events, restored, resumed := sig.events, sig.restored, sig.resumed
	hb := heartbeat{interval: c.opts.PingInterval, timeout: c.opts.PingTimeout, woke: time.Now(),
		unread: func() bool { return conn.ws.Unread() > 0 }, unwritten: conn.ws.Unwritten}
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
		case <-resumed:
			// Back from sleep: probe now rather than when the timer, which
			// did not count the sleep, comes due (Resumes).
			resumed = c.opts.Resume.C()
			if hbTimer.t != nil {
				p := readerProgress(progress.Load())
				var w writeProgress
				w.acked, w.backlog, w.ok = conn.ws.WriteProgress()
				// The probe's time is taken before it goes out: an answer
				// read before a clock taken after it would not count.
				now := time.Now()
				c.probe(ctx, conn)
				hbTimer.reset(hb.resumed(now, p, w))
			}
		case <-hbTimer.c():
			// Progress first: a message handed over between the two loads
			// then counts as moved at the next wake-up, not lost.
			p := readerProgress(progress.Load())
			var w writeProgress
			w.acked, w.backlog, w.ok = conn.ws.WriteProgress()
			action, next := hb.next(time.Now(), conn.ws.LastRead(), p, w)
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

// read is the connection's reader goroutine. It marks each message it hands to
// the Handler in progress (readerProgress), so the heartbeat does not take time
// spent blocked on the app for silence; a Flush counts as a message.
func (c *Client) read(conn *Conn, events chan<- connEvent, progress *atomic.Uint64) {
	confirm := c.opts.Confirm
	flush := flushFunc(c.opts.Handler, conn, progress)
	for {
		op, data, err := conn.ws.ReadMessageFlushing(flush)
		if err != nil {
			flush()
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
// a message (Flush may block on the app). It is
// built here, not in read, to keep read's frame small: the reader of an
// idle connection parks at the bottom of a deep call chain, and a larger
// frame there took its stack from 2 to 4 KiB, on every connection.
//
//go:noinline
func flushFunc(h Handler, conn *Conn, progress *atomic.Uint64) func() {
	return func() {
		progress.Add(1)
		h.Flush(conn)
		progress.Add(1)
	}
}

// readError maps wsconn's errors to the package's: the upstream's close frame
// becomes *CloseError, a close frame that breaks the protocol a permanent
// *BrokenCloseError, and an oversized upstream message a 1009 close naming
// the limit, so the app learns why (docs/design.md "Limits").
func readError(err error) error {
	var ce *wsconn.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: int(ce.Code), Reason: ce.Reason}
	}
	var pe *wsconn.ProtocolError
	switch {
	case !errors.As(err, &pe):
	case pe.InClose:
		return &BrokenCloseError{Code: int(pe.PeerCode), Problem: pe.Reason}
	case pe.Code == ws.StatusMessageTooBig:
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
