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

// logConnected logs a connection that opened.
func (c *Client) logConnected(conn *Conn) {
	c.log.Info("upstream connected", zap.Uint64("gen", conn.gen),
		zap.Int("attempt", c.failures), zap.String("protocol", conn.protocol), zap.String("remote", conn.remote),
		zap.Bool("compressed", conn.compressed))
}

// connWatch is the per-connection part of the state machine: what the
// connection's reader and restore report, the heartbeat, resumes from sleep
// and the confirmation. It lives on the heap rather than in the frames of
// the Client's goroutine, which parks in watch for the connection's whole
// life: every byte of the frames it parks under is stack that every idle
// session pays (see Client.run). The state machine owns it; the reader and
// the restore use only events, restored and progress.
type connWatch struct {
	c    *Client
	conn *Conn
	// cancel ends the context Restore runs with.
	cancel   context.CancelFunc
	events   chan connEvent // the reader's: at most one confirmation and one end
	restored chan error     // the restore's result; nil once received
	resumed  <-chan struct{}
	progress atomic.Uint64 // a readerProgress
	hb       heartbeat
	hbTimer  timer
	// stable confirms the connection after StableAfter when Options.Confirm
	// is nil; it is stopped once the connection is confirmed.
	stable    timer
	confirmed bool
	wg        sync.WaitGroup // the reader and the restore
}

// startWatch opens the connection: its reader and its restore start. watch
// then follows it until it is lost or ctx ends, and endWatch waits for its
// goroutines.
func (c *Client) startWatch(ctx context.Context, conn *Conn) *connWatch {
	c.setState(StateOpen)
	c.logConnected(conn)
	cctx, cancel := context.WithCancel(ctx)
	w := &connWatch{
		c: c, conn: conn, cancel: cancel,
		events:   make(chan connEvent, 2),
		restored: make(chan error, 1),
		// Taken before the reader starts: a resume after the connection's
		// first message is this connection's to probe.
		resumed: c.opts.Resume.C(),
	}
	w.wg.Add(2)
	go w.read()
	go w.restore(cctx)
	w.hb = heartbeat{interval: c.opts.PingInterval, timeout: c.opts.PingTimeout, woke: time.Now(),
		unread: func() bool { return conn.ws.Unread() > 0 }, unwritten: conn.ws.Unwritten}
	w.hbTimer = newTimer(w.hb.interval)
	if c.opts.Confirm == nil {
		w.stable = newTimer(max(c.opts.StableAfter, time.Nanosecond))
	}
	return w
}

func (w *connWatch) restore(ctx context.Context) {
	defer w.wg.Done()
	w.restored <- w.c.sess.Handler.Restore(ctx, w.conn)
}

// endWatch closes the connection, waits for its goroutines and reports the
// loss.
func (c *Client) endWatch(ctx context.Context, w *connWatch, err error) error {
	conn := w.conn
	w.hbTimer.stop()
	w.stable.stop()
	w.cancel()
	conn.ws.Close(ws.StatusNormalClosure, "") // no-op when already closing
	<-conn.ws.Done()                          // bounded by wsconn's CloseWait
	w.wg.Wait()
	if n := conn.ws.ControlDropped(); n > 0 {
		c.log.Warn("upstream sent pings faster than tether answered them; only the latest were answered",
			zap.Uint64("gen", conn.gen), zap.Uint64("pings_unanswered", n))
	}
	c.setState(StateLost)
	if w.confirmed {
		c.lostAt = c.opts.now()
	}
	c.sess.Handler.Lost(conn, err)
	if ctx.Err() == nil {
		c.opts.Observer.Lost(lossReason(err))
	}
	return err
}

// watch waits for what ends the connection: the Client's end, the reader's
// error, a failed restore or the heartbeat's verdict. It is where the
// Client's goroutine parks while the connection is open: what an event
// needs done beyond a few lines runs aside (see Client.run).
func (w *connWatch) watch(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ErrClosed
		case ev := <-w.events:
			if ev.err != nil {
				return ev.err
			}
			w.confirm()
		case err := <-w.restored:
			if err := w.restoreEnded(ctx, err); err != nil {
				return err
			}
		case <-w.stable.c():
			w.confirm()
		case <-w.resumed:
			w.resume(ctx)
		case <-w.hbTimer.c():
			if err := w.beat(ctx); err != nil {
				return err
			}
		}
	}
}

func (w *connWatch) confirm() {
	if w.confirmed {
		return
	}
	w.confirmed = true
	aside(func() {
		w.stable.stop()
		w.stable = timer{} // nothing left to wait for there
		w.c.confirmed(w.conn)
	})
}

// restoreEnded takes the restore's result: an error fails the connection.
func (w *connWatch) restoreEnded(ctx context.Context, err error) error {
	w.restored = nil
	switch {
	case err != nil && ctx.Err() != nil:
		// Restore saw the Client's own shutdown through its context;
		// select may pick this case before ctx.Done.
		return ErrClosed
	case err != nil:
		return &restoreError{err: err}
	}
	return nil
}

// resume probes at once after the machine woke from sleep, rather than
// when the heartbeat's timer, which did not count the sleep, comes due
// (Resumes).
func (w *connWatch) resume(ctx context.Context) {
	aside(func() {
		w.resumed = w.c.opts.Resume.C()
		if w.hbTimer.t == nil {
			return
		}
		p := readerProgress(w.progress.Load())
		wp := w.writeProgress()
		// The probe's time is taken before it goes out: an answer read
		// before a clock taken after it would not count.
		now := time.Now()
		w.c.probe(ctx, w.conn)
		w.hbTimer.reset(w.hb.resumed(now, p, wp))
	})
}

// beat is the heartbeat's wake-up: probe, declare the connection dead, or
// wait on.
func (w *connWatch) beat(ctx context.Context) (err error) {
	aside(func() {
		// Progress first: a message handed over between the two loads
		// then counts as moved at the next wake-up, not lost.
		p := readerProgress(w.progress.Load())
		wp := w.writeProgress()
		action, next := w.hb.next(time.Now(), w.conn.ws.LastRead(), p, wp)
		switch action {
		case beatDead:
			w.conn.ws.Abort()
			err = ErrHeartbeatTimeout
			return
		case beatProbe:
			w.c.probe(ctx, w.conn)
		}
		w.hbTimer.reset(next)
	})
	return err
}

func (w *connWatch) writeProgress() writeProgress {
	var p writeProgress
	p.acked, p.backlog, p.ok = w.conn.ws.WriteProgress()
	return p
}

// read is the connection's reader goroutine. It marks each message it hands to
// the Handler in progress (readerProgress), so the heartbeat does not take time
// spent blocked on the app for silence; a Flush counts as a message.
func (w *connWatch) read() {
	defer w.wg.Done()
	c, conn := w.c, w.conn
	confirm := c.opts.Confirm
	flush := flushFunc(c.sess.Handler, conn, &w.progress)
	for {
		op, data, err := conn.ws.ReadMessageFlushing(flush)
		if err != nil {
			flush()
			w.events <- connEvent{err: readError(err)}
			return
		}
		if c.opts.HeartbeatReply != nil && c.opts.HeartbeatReply(data) {
			continue
		}
		if confirm != nil && confirm(data) {
			w.events <- connEvent{confirmed: true}
			confirm = nil
		}
		w.progress.Add(1) // busy
		c.sess.Handler.Message(conn, op, data)
		w.progress.Add(1) // one more message handed over, not busy
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
