package ssetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// endHow says how a response is ended.
type endHow int

const (
	endNone  endHow = iota
	endClean        // the handler returns: the response ends with its final chunk
	endDrop         // the TCP connection is closed mid-response
	endReset        // the TCP connection is reset (RST)
)

// stream is one response being served. Fields below quit are guarded by
// Server.mu.
type stream struct {
	conn    net.Conn
	wake    chan struct{} // capacity 1: something was queued
	quit    chan struct{} // closed when the response must end
	how     endHow
	pending []byte // bytes queued for the handler to write
	stalled bool   // write nothing more, keep the connection
	events  int    // events since the last CommentEvery comment
}

func newStream(r *http.Request) *stream {
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	return &stream{conn: conn, wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

// queueLocked appends b for the handler to write and wakes it.
func (st *stream) queueLocked(b []byte) {
	st.pending = append(st.pending, b...)
	select {
	case st.wake <- struct{}{}:
	default: // already woken
	}
}

// queueEventLocked queues an encoded event, and the comment that follows
// every Options.CommentEvery events.
func (s *Server) queueEventLocked(st *stream, ev []byte) {
	st.queueLocked(ev)
	st.events++
	if s.opts.CommentEvery > 0 && st.events%s.opts.CommentEvery == 0 {
		st.queueLocked(s.comment("after event " + strconv.Itoa(st.events)))
	}
}

// endLocked ends a response the way how says, once.
func (s *Server) endLocked(st *stream, how endHow) {
	if st.how != endNone {
		return
	}
	st.how = how
	close(st.quit)
	delete(s.streams, st)
	delete(s.held, st)
	if st.conn != nil && how >= endDrop {
		if tcp, ok := st.conn.(*net.TCPConn); ok && how == endReset {
			// SO_LINGER 0 makes Close send RST instead of FIN.
			_ = tcp.SetLinger(0)
		}
		_ = st.conn.Close()
	}
	s.notifyLocked()
}

func (s *Server) leave(st *stream) {
	s.mu.Lock()
	s.endLocked(st, endClean)
	s.mu.Unlock()
}

// serve is the handler for every request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	st, refusal := s.admit(r)
	if st == nil {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.leave(st)
	if refusal != nil {
		s.refuse(w, r, st, *refusal)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	s.pump(r.Context(), w, rc, st)
}

// pump writes what is queued for st, flushing after every batch, until the
// response must end. With Options.Heartbeat it queues a comment whenever
// nothing was written for that long.
func (s *Server) pump(ctx context.Context, w io.Writer, rc *http.ResponseController, st *stream) {
	var beat *time.Timer
	var beats <-chan time.Time
	if s.opts.Heartbeat > 0 {
		beat = time.NewTimer(s.opts.Heartbeat)
		defer beat.Stop()
		beats = beat.C
	}
	for {
		if b := s.take(st); len(b) > 0 {
			if _, err := w.Write(b); err != nil || rc.Flush() != nil {
				return
			}
			if beat != nil {
				beat.Reset(s.opts.Heartbeat)
			}
			continue
		}
		select {
		case <-st.wake:
		case <-beats:
			s.heartbeat(st)
			beat.Reset(s.opts.Heartbeat)
		case <-st.quit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// take returns what is queued for st, nothing once st is stalled.
func (s *Server) take(st *stream) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.stalled {
		return nil
	}
	b := st.pending
	st.pending = nil
	return b
}

func (s *Server) heartbeat(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !st.stalled {
		st.queueLocked(s.comment("keep-alive"))
	}
}

// refuse answers with a scripted Response instead of a stream.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, st *stream, resp Response) {
	for k, v := range resp.Header {
		w.Header()[k] = append([]string(nil), v...)
	}
	w.WriteHeader(resp.status())
	_, _ = io.WriteString(w, resp.Body)
	if !resp.Stall {
		return
	}
	_ = http.NewResponseController(w).Flush()
	select {
	case <-st.quit:
	case <-r.Context().Done():
	}
}
