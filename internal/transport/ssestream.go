package transport

import (
	"context"
	"io"
	"time"
)

// sseBatchBytes bounds one write to an sse:// app: a backlog goes out in
// writes of about this size (a single larger event alone), so the app
// reads the first events while the rest are copied.
const sseBatchBytes = 64 << 10

// keepAliveComment is written to an idle stream: a comment line, which an
// EventSource ignores, but which keeps proxies and load balancers between
// the app and tether from closing a quiet connection as idle, and tells
// tether early that an app has gone (the write fails).
const keepAliveComment = ": keep-alive\n"

// sseWriter writes one request's response: the notice, then the session's
// events as they come, flushing after each write.
type sseWriter struct {
	w     io.Writer
	att   *SSEAttachment
	buf   []byte
	parts [][]byte
}

// Stream serves att, attached to a (Attach), until the app goes (ctx ends
// or a write fails), a newer request replaces it, or the session ends, then
// detaches it. It returns whether the session now waits SSEOptions.Linger
// for the app to come back, and why the stream stopped: nil after a close
// the app was told about, ErrSSEClosed, ErrSSEReplaced, ErrSSEAppGone, or
// the write's error. w is the response att was made from, its headers
// written.
func (a *SSEApp) Stream(ctx context.Context, w io.Writer, att *SSEAttachment) (lingers bool, err error) {
	err = a.stream(ctx, w, att)
	return a.detach(att), err
}

func (a *SSEApp) stream(ctx context.Context, w io.Writer, att *SSEAttachment) error {
	sw := &sseWriter{w: w, att: att}
	// The notice, or just the headers: either way the app's EventSource
	// opens now, not at the first event.
	if err := sw.write(att.notice); err != nil {
		return err
	}
	keep := time.NewTimer(a.opts.KeepAlive)
	defer keep.Stop()
	for {
		parts, upTo, note, step := a.take(att, sw.parts[:0], sseBatchBytes)
		sw.parts = parts
		switch step {
		case sseReplaced:
			return ErrSSEReplaced
		case sseStop:
			return ErrSSEClosed
		case sseEnd:
			return sw.write(note)
		case sseWrite:
			err := sw.writeParts()
			if err != nil {
				return err
			}
			a.wrote(att, upTo)
			keep.Reset(a.opts.KeepAlive)
			continue
		}
		select {
		case <-att.wake:
		case <-keep.C:
			if err := sw.write([]byte(keepAliveComment)); err != nil {
				return err
			}
			keep.Reset(a.opts.KeepAlive)
		case <-ctx.Done():
			return ErrSSEAppGone
		}
	}
}

// writeParts writes the events taken, in one write: a single event as it
// is, several copied into one buffer.
func (sw *sseWriter) writeParts() error {
	defer clear(sw.parts) // the log may drop the events once written
	if len(sw.parts) == 1 {
		return sw.write(sw.parts[0])
	}
	b := sw.buf[:0]
	for _, p := range sw.parts {
		b = append(b, p...)
	}
	if cap(b) <= maxRetainedLineBuffer {
		sw.buf = b
	} else {
		sw.buf = nil
	}
	return sw.write(b)
}

// write writes b, which may be empty, and flushes the response.
func (sw *sseWriter) write(b []byte) error {
	if len(b) > 0 {
		if _, err := sw.w.Write(b); err != nil {
			return err
		}
	}
	return sw.att.rc.Flush()
}
