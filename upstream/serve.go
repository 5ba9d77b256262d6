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

// logConnected logs a connection that opened.
func (c *Client) logConnected(conn *Conn) {
	c.log.Info("upstream connected", zap.Uint64("gen", conn.gen),
		zap.Int("attempt", c.failures), zap.String("protocol", conn.protocol), zap.String("remote", conn.remote),
		zap.Bool("compressed", conn.compressed))
}

// Events of a connection, one bit each of connWatch.state, with the bit
// that says a goroutine drives the state machine.
const (
	evStop      uint32 = 1 << iota // the Client's context ended
	evConfirmed                    // the reader saw a confirming message
	evReadEnd                      // the reader stopped; readErr says why
	evRestored                     // Restore returned; restoreErr says how
	evStable                       // StableAfter passed
	evResumed                      // the machine woke from sleep
	evBeat                         // the heartbeat's timer fired
	evRunning                      // a goroutine drives the state machine
)

// connWatch is the per-connection part of the state machine: what the
// connection's reader and restore report, the heartbeat, resumes from sleep
// and the confirmation.
//
// No goroutine waits for these while the connection is open: each is a
// callback (the reader's and the restore's calls, time.AfterFunc,
// context.AfterFunc) that sets its bit in state and, when no goroutine
// drives the state machine, starts one (report). That goroutine handles
// what is pending, in a fixed order, until nothing is, and exits (serve):
// an idle connection costs no parked goroutine for its state machine, nor
// its 2 KiB stack, descriptor and the sudogs of a select. The evRunning
// bit keeps it one goroutine at a time: a report that finds it set leaves
// its event to the goroutine running, which looks again before it exits.
// Once the connection is lost, the bit stays set: reports still under way
// (a timer that fired as it was stopped) start nothing.
//
// The state machine owns the fields; the reader and the restore write only
// readErr and restoreErr, before they report, and progress.
type connWatch struct {
	c     *Client
	conn  *Conn
	state atomic.Uint32 // pending events and evRunning
	// readErr is why the reader stopped (evReadEnd), restoreErr what
	// Restore returned (evRestored).
	readErr, restoreErr error
	// cancel ends the context Restore runs with; nil once Restore
	// returned, so that the context goes with it.
	cancel   context.CancelFunc
	progress atomic.Uint64 // a readerProgress
	hb       heartbeat
	// hbTimer wakes the heartbeat; nil when it is off.
	hbTimer *time.Timer
	// stable confirms the connection after StableAfter when Options.Confirm
	// is nil; nil once the connection is confirmed.
	stable     *time.Timer
	stopResume func() bool // stops the callback of the next resume
	confirmed  bool
	wg         sync.WaitGroup // the reader and the restore
}

// startWatch opens the connection: its reader and its restore start, its
// timers and callbacks are set. The calling goroutine drives the state
// machine (evRunning) until it serves w; endWatch stops them all and waits
// for the goroutines.
func (c *Client) startWatch(ctx context.Context, conn *Conn) *connWatch {
	c.setState(StateOpen)
	c.logConnected(conn)
	cctx, cancel := context.WithCancel(ctx)
	w := &connWatch{c: c, conn: conn, cancel: cancel}
	w.state.Store(evRunning)
	// Before the reader starts: a resume after the connection's first
	// message is this connection's to probe.
	w.watchResume()
	w.wg.Add(2)
	go w.read()
	go w.restore(cctx)
	w.hb = heartbeat{interval: c.opts.PingInterval, timeout: c.opts.PingTimeout, woke: time.Now(),
		unread: func() bool { return conn.ws.Unread() > 0 }, unwritten: conn.ws.Unwritten}
	if w.hb.interval > 0 {
		w.hbTimer = time.AfterFunc(w.hb.interval, func() { w.report(evBeat) })
	}
	if c.opts.Confirm == nil {
		w.stable = time.AfterFunc(max(c.opts.StableAfter, time.Nanosecond), func() { w.report(evStable) })
	}
	c.watching.Store(w)
	return w
}

// watchResume has the next resume from sleep reported (Options.Resume).
func (w *connWatch) watchResume() {
	w.stopResume = w.c.opts.Resume.afterNext(func() { w.report(evResumed) })
}

// report records ev and starts a goroutine to drive the state machine
// unless one does (connWatch).
func (w *connWatch) report(ev uint32) {
	if w.state.Or(ev|evRunning)&evRunning == 0 {
		go w.c.run(w.c.ctx, w)
	}
}

func (w *connWatch) restore(ctx context.Context) {
	defer w.wg.Done()
	w.restoreErr = w.c.sess.Handler.Restore(ctx, w.conn)
	w.report(evRestored)
}

// endWatch stops what would report on w, closes the connection, waits for
// its goroutines and reports the loss.
func (c *Client) endWatch(ctx context.Context, w *connWatch, err error) error {
	conn := w.conn
	c.watching.Store(nil)
	if w.hbTimer != nil {
		w.hbTimer.Stop()
	}
	if w.stable != nil {
		w.stable.Stop()
	}
	w.stopResume()
	if w.cancel != nil {
		w.cancel()
	}
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

// serve handles w's pending events until none is left, and returns nil:
// the goroutine calling it no longer drives the state machine, and the
// next report starts another. It returns what ends the connection
// instead: the Client's end, the reader's error, a failed restore or the
// heartbeat's verdict; the caller then still drives the state machine.
func (w *connWatch) serve(ctx context.Context) error {
	for {
		ev := w.state.Swap(evRunning) &^ evRunning
		if ev == 0 {
			if ctx.Err() != nil {
				// Ended before watching was set: interrupt found no
				// connection to report to.
				return ErrClosed
			}
			if w.state.CompareAndSwap(evRunning, 0) {
				return nil
			}
			continue
		}
		if err := w.handle(ctx, ev); err != nil {
			return err
		}
	}
}

// handle takes the events ev, in the order they can happen in: a
// confirmation the reader saw before it stopped counts.
func (w *connWatch) handle(ctx context.Context, ev uint32) error {
	if ev&evStop != 0 || ctx.Err() != nil {
		return ErrClosed
	}
	if ev&evConfirmed != 0 {
		w.confirm()
	}
	if ev&evReadEnd != 0 {
		return w.readErr
	}
	if ev&evRestored != 0 {
		if err := w.restoreEnded(ctx); err != nil {
			return err
		}
	}
	if ev&evStable != 0 {
		w.confirm()
	}
	if ev&evResumed != 0 {
		w.resume(ctx)
	}
	if ev&evBeat != 0 {
		return w.beat(ctx)
	}
	return nil
}

func (w *connWatch) confirm() {
	if w.confirmed {
		return
	}
	w.confirmed = true
	if w.stable != nil {
		w.stable.Stop()
		w.stable = nil // nothing left to wait for there
	}
	w.c.confirmed(w.conn)
}

// restoreEnded takes the restore's result: an error fails the connection.
func (w *connWatch) restoreEnded(ctx context.Context) error {
	w.cancel() // Restore returned: its context is of no more use
	w.cancel = nil
	switch err := w.restoreErr; {
	case err != nil && ctx.Err() != nil:
		// Restore saw the Client's own shutdown through its context,
		// which may be reported before the shutdown itself.
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
	w.watchResume()
	if w.hbTimer == nil {
		return
	}
	p := readerProgress(w.progress.Load())
	wp := w.writeProgress()
	// The probe's time is taken before it goes out: an answer read
	// before a clock taken after it would not count.
	now := time.Now()
	w.c.probe(ctx, w.conn)
	w.resetBeat(w.hb.resumed(now, p, wp))
}

// beat is the heartbeat's wake-up: probe, declare the connection dead, or
// wait on.
func (w *connWatch) beat(ctx context.Context) error {
	now := time.Now()
	if now.Before(w.hb.due) {
		// Earlier than the heartbeat asked to come back: a firing that
		// a later reset superseded (Stop and Reset do not hold back an
		// AfterFunc's function that has started). The one asked for
		// comes at or after due, which is taken before the reset.
		return nil
	}
	// Progress first: a message handed over between the two loads
	// then counts as moved at the next wake-up, not lost.
	p := readerProgress(w.progress.Load())
	wp := w.writeProgress()
	action, next := w.hb.next(now, w.conn.ws.LastRead(), p, wp)
	switch action {
	case beatDead:
		w.conn.ws.Abort()
		return ErrHeartbeatTimeout
	case beatProbe:
		w.c.probe(ctx, w.conn)
	}
	w.resetBeat(next)
	return nil
}

// resetBeat has the heartbeat woken in d, which it asked for.
func (w *connWatch) resetBeat(d time.Duration) { w.hbTimer.Reset(d) }

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
			w.readErr = readError(err)
			w.report(evReadEnd)
			return
		}
		if c.opts.HeartbeatReply != nil && c.opts.HeartbeatReply(data) {
			continue
		}
		if confirm != nil && confirm(data) {
			w.report(evConfirmed)
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
