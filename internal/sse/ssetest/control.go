package ssetest

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Response is a scripted answer that replaces a stream.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is sent as it is (Retry-After, Content-Type, WWW-Authenticate).
	Header http.Header
	// Body is written after the headers.
	Body string
	// Stall keeps the connection open after the body and writes nothing
	// more, until Close, DropAll, ResetAll or EndAll: an upstream that
	// accepts and then never speaks.
	Stall bool
}

func (r Response) status() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// Request is what the server saw of one request, and what it answered.
type Request struct {
	N           int         // arrival order, from 1
	Time        time.Time   // arrival, by Options.Now
	RemoteAddr  string      // the client's address and port
	Header      http.Header // as received (Last-Event-ID, Authorization, ...)
	LastEventID string      // the Last-Event-ID header, "" if absent
	Status      int         // the status answered
	Replayed    int         // events replayed from the history
	// GapFrom and GapTo are the ids, inclusive, that the client asked for
	// (via Last-Event-ID) but the history no longer held: 0, 0 when none.
	GapFrom, GapTo uint64
}

// admit records r and decides its answer: a stream (registered, with its
// opening retry and replay queued) or the next scripted Response. It
// returns nil after Close.
func (s *Server) admit(r *http.Request) (*stream, *Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil
	}
	rec := Request{
		N:           len(s.reqs) + 1,
		Time:        s.opts.Now(),
		RemoteAddr:  r.RemoteAddr,
		Header:      r.Header.Clone(),
		LastEventID: r.Header.Get("Last-Event-ID"),
	}
	st := newStream(r)
	defer func() {
		s.reqs = append(s.reqs, rec)
		s.notifyLocked()
	}()
	if len(s.queue) > 0 {
		resp := s.queue[0]
		s.queue = s.queue[1:]
		rec.Status = resp.status()
		if resp.Stall {
			s.held[st] = struct{}{}
		}
		return st, &resp
	}
	rec.Status = http.StatusOK
	s.openLocked(st, &rec)
	s.streams[st] = struct{}{}
	return st, nil
}

// openLocked queues what a new stream starts with: the retry field, then
// the events after the client's Last-Event-ID.
func (s *Server) openLocked(st *stream, rec *Request) {
	if s.opts.Retry > 0 {
		st.queueLocked(s.retry(s.opts.Retry))
	}
	if rec.LastEventID == "" {
		return
	}
	after, err := strconv.ParseUint(rec.LastEventID, 10, 64)
	if err != nil {
		return // not one of ours: live events only
	}
	events, from, to := s.hist.after(after)
	rec.Replayed, rec.GapFrom, rec.GapTo = len(events), from, to
	for _, ev := range events {
		s.queueEventLocked(st, ev)
	}
}

// RespondNext answers each of the next k requests with r instead of a
// stream. Calls queue up: RespondNext(1, a) then RespondNext(2, b)
// answers a, b, b.
func (s *Server) RespondNext(k int, r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range k {
		s.queue = append(s.queue, r)
	}
}

// EndAll ends every live response cleanly, as a server shutting down
// gracefully does: the client reads the end of the body. It returns how
// many responses it ended.
func (s *Server) EndAll() int { return s.endAll(endClean) }

// DropAll closes the TCP connection of every live response mid-stream:
// the client's body read fails with an unexpected EOF. Events queued but
// not yet written are lost, as in a crash. It returns how many it closed.
func (s *Server) DropAll() int { return s.endAll(endDrop) }

// ResetAll is DropAll with a TCP reset (RST) instead of a close (FIN).
func (s *Server) ResetAll() int { return s.endAll(endReset) }

func (s *Server) endAll(how endHow) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, set := range []map[*stream]struct{}{s.streams, s.held} {
		for st := range set {
			s.endLocked(st, how)
			n++
		}
	}
	return n
}

// StallAll makes every live stream go silent: nothing more is written on
// it (events, comments, heartbeats), and its connection stays open until
// Close, DropAll, ResetAll or EndAll. Streams opened later are not
// stalled. It returns how many it stalled.
func (s *Server) StallAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for st := range s.streams {
		if !st.stalled {
			st.stalled, st.pending = true, nil
			n++
		}
	}
	return n
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requestsLocked()
}

func (s *Server) requestsLocked() []Request {
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// WaitRequests waits until at least n requests have arrived, and returns
// them all.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	var out []Request
	err := s.wait(ctx, func() bool {
		if len(s.reqs) < n {
			return false
		}
		out = s.requestsLocked()
		return true
	})
	return out, err
}

// Streams returns how many streams are live (stalled ones included).
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// WaitStreams waits until exactly n streams are live.
func (s *Server) WaitStreams(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return len(s.streams) == n })
}
