package ssetest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// History is how many of the latest events are kept for requests that
	// resume with Last-Event-ID. Default 64.
	History int
	// CommentEvery writes a comment after every CommentEvery events on
	// each stream. 0 writes none.
	CommentEvery int
	// Heartbeat writes a comment on each stream that has written nothing
	// for this long. 0 writes none.
	Heartbeat time.Duration
	// Retry, when positive, is sent as a "retry" field (in milliseconds)
	// at the start of every stream.
	Retry time.Duration
	// LineEnd ends every line written: "\n" (default), "\r\n" or "\r".
	LineEnd string
	// Now stamps each Request. Default time.Now.
	Now func() time.Time
}

const defaultHistory = 64

// Server is a scriptable SSE upstream. Create it with NewServer.
type Server struct {
	opts    Options
	ts      *httptest.Server
	le      string
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change a test may wait for
	hist    history
	streams map[*stream]struct{}
	held    map[*stream]struct{} // refused-but-stalled responses, ended by Close
	queue   []Response           // answers for the next requests
	reqs    []Request
	closed  bool
	once    sync.Once
}

type connKey struct{}

// NewServer starts a Server on 127.0.0.1:0.
func NewServer(opts Options) *Server {
	if opts.History <= 0 {
		opts.History = defaultHistory
	}
	if opts.LineEnd == "" {
		opts.LineEnd = "\n"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:    opts,
		le:      opts.LineEnd,
		changed: make(chan struct{}),
		hist:    history{max: opts.History},
		streams: make(map[*stream]struct{}),
		held:    make(map[*stream]struct{}),
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// The handler needs the TCP connection to drop or reset it mid-stream.
	s.ts.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	s.ts.Start()
	return s
}

// URL returns the server's base URL, http://127.0.0.1:port. Every path
// serves the same stream.
func (s *Server) URL() string { return s.ts.URL }

// Close ends every response, closes every connection and waits for every
// handler to return. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		for st := range s.streams {
			s.endLocked(st, endDrop)
		}
		for st := range s.held {
			s.endLocked(st, endDrop)
		}
		s.mu.Unlock()
		// Active responses have all been told to end, so this returns
		// once their handlers have.
		s.ts.Close()
	})
}

// notifyLocked wakes every waiter.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait blocks until cond, evaluated under the lock, holds or ctx ends.
func (s *Server) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
