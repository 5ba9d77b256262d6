package transport

import (
	"io"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
)

// Close writes what is queued, then closes the app's socket (see
// finishClose). tcp:// has no close frame: code and reason, what a
// WebSocket app would have got, are logged instead. It does not block;
// Done is closed when it has finished. Later calls do nothing.
func (c *LineConn) Close(code ws.StatusCode, reason string) {
	if !c.shutdown() {
		return
	}
	log := c.opts.Log.Info
	if code == ws.StatusNormalClosure && reason == "" {
		log = c.opts.Log.Debug // the session's end after the app left
	}
	log("closing tcp app: queued lines are written, then the socket is closed (tcp:// has no close frame)",
		zap.Int("close_code", int(code)), zap.String("close_reason", reason))
}

// shutdown stops queueing and has the writer finish the close. It reports
// whether this call started it.
func (c *LineConn) shutdown() bool {
	c.mu.Lock()
	if !c.q.CloseLocked() {
		c.mu.Unlock()
		return false
	}
	c.q.WakeLocked() // the writer finishes the close once the queue is written
	c.unlockQueued(false)
	// An app that stopped reading must not hold the close up for ever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.CloseWait))
	return true
}

// finishClose runs on the writer once the queue is written: it half-closes,
// so the app reads everything and then EOF, and waits up to CloseWait for
// the app to close its side before closing the socket. Closing a socket
// with unread bytes in it sends RST, which can destroy the lines the app has
// not read yet (RFC 9112 §9.6): so when the reader stopped on a broken rule,
// what the app still sends is read and discarded meanwhile.
func (c *LineConn) finishClose() {
	deadline := time.Now().Add(c.opts.CloseWait)
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.readDone:
		if c.violated.Load() {
			_ = c.nc.SetReadDeadline(deadline)
			_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, lingerBytes))
		}
	case <-t.C:
	case <-c.quit:
	}
	c.Abort()
}

// Abort closes the socket at once: the session's end was forced
// (shutdown deadline), or a write failed.
func (c *LineConn) Abort() {
	c.abortOnce.Do(func() {
		c.q.Close() // a Send waiting for room returns ErrLineClosed now
		close(c.quit)
		_ = c.nc.Close()
	})
}

// Done is closed once the writer has exited and the socket is closed.
func (c *LineConn) Done() <-chan struct{} { return c.done }
