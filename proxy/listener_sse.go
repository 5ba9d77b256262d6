package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/gobwas/ws"
	"github.com/tetherproxy/tether/internal/browser"
	"github.com/tetherproxy/tether/internal/handshake"
	"github.com/tetherproxy/tether/internal/labels"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An sse:// listener serves Server-Sent Events to EventSource apps over
// HTTP/1.1 (net/http): a GET on its path is answered with a
// text/event-stream response that stays open as long as the app wants it,
// whatever the upstream does, carrying one event per upstream message
// (ssesession.go, transport.SSEApp). Anything else is refused before a session
// exists or the upstream is dialled, in this order: a Host that is neither
// a loopback name nor the listen address, or an Origin not in
// TETHER_ALLOWED_ORIGINS (403, as on a WebSocket listener: internal/browser);
// another path (404); another method (405); a request with a body (400). Admission and the first dial
// then answer as for a WebSocket app: 503 when full or draining, 502 when
// the upstream refused for good.
//
// An EventSource request from a web page is subject to CORS, unlike a
// WebSocket handshake: an allowed Origin is answered as
// internal/browser's CORS functions say (browser.AllowOrigin,
// browser.Preflight).

// SSEListener is a listener to serve with ServeKind(ln, ListenerSSE): it
// carries the path its endpoint answers on. A plain net.Listener served as
// ListenerSSE answers on "/".
type SSEListener struct {
	net.Listener
	// Path is the request path of the event stream, matched exactly
	// (decoded, query ignored): "/events" does not answer "/events/".
	Path string
}

// ServeSSE serves EventSource apps on ln at path, as ServeKind does for
// ListenerSSE.
func (s *Server) ServeSSE(ln net.Listener, path string) error {
	return s.ServeKind(&SSEListener{Listener: ln, Path: path}, ListenerSSE)
}

// ssePath is the path an sse:// listener answers on.
func ssePath(ln net.Listener) string {
	if l, ok := ln.(*SSEListener); ok && l.Path != "" {
		return l.Path
	}
	return "/"
}

// checkSSEPath refuses a path no request can have.
func checkSSEPath(p string) error {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#") {
		return fmt.Errorf("proxy: sse:// path %q: want an absolute path without query or fragment", p)
	}
	return nil
}

// sseListener is one sse:// listener: its endpoint, and the connections
// its http.Server has open, tracked so that the drain can close those that
// carry no stream and wait for the others.
type sseListener struct {
	s    *Server
	path string
	log  *zap.Logger

	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
	wg    sync.WaitGroup // one per connection until it closes
}

// serveSSE runs an sse:// listener's HTTP server until Shutdown closes ln.
// Its connections are then left to finish in a goroutine the server waits
// for: connections idle or still sending their request are closed, one
// answering a short refusal closes after it (keep-alives are off), and a
// stream ends with its session, which the drain closes.
func (s *Server) serveSSE(ln net.Listener, path string) error {
	l := &sseListener{s: s, path: path, log: s.log.With(zap.String("listener", string(ListenerSSE))),
		conns: map[net.Conn]http.ConnState{}}
	hs := l.httpServer()
	err := hs.Serve(ln)
	hs.SetKeepAlivesEnabled(false)
	l.closeQuiet()
	// ServeKind still counts in s.wg here, so this Add cannot race its Wait.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		l.wg.Wait()
	}()
	if s.isDraining() || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("accept: %w", err)
}

// httpServer configures net/http as a WebSocket listener bounds its
// handshakes: the request headers within HandshakeTimeout (slowloris) and
// 16 KiB (431 beyond). There is no write timeout: a stream lasts. Request
// contexts derive from the server's, so a Shutdown that gives up ends
// every stream.
func (l *sseListener) httpServer() *http.Server {
	s := l.s
	errLog, err := zap.NewStdLogAt(l.log.Named("http"), zapcore.DebugLevel)
	if err != nil {
		// Only an invalid level fails, and DebugLevel is valid.
		panic(err)
	}
	return &http.Server{
		Handler:           l,
		ReadHeaderTimeout: s.opts.HandshakeTimeout,
		IdleTimeout:       s.opts.HandshakeTimeout,
		MaxHeaderBytes:    handshake.MaxRequestBytes,
		ConnState:         l.track,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          errLog,
	}
}

// track follows each connection's state. StateNew is reported by Serve's
// own goroutine before the connection's starts, so every Add happens
// before serveSSE waits.
func (l *sseListener) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, known := l.conns[c]
	switch {
	case st == http.StateNew:
		l.wg.Add(1)
		l.conns[c] = st
	case !known:
	case st == http.StateClosed || st == http.StateHijacked:
		delete(l.conns, c)
		l.wg.Done()
	default:
		l.conns[c] = st
	}
}

// closeQuiet closes the connections that are not answering a request: a
// kept-alive one waiting for the next, or a new one whose request has not
// begun.
func (l *sseListener) closeQuiet() {
	var quiet []net.Conn
	l.mu.Lock()
	for c, st := range l.conns {
		if st == http.StateNew || st == http.StateIdle {
			quiet = append(quiet, c)
		}
	}
	l.mu.Unlock()
	for _, c := range quiet {
		_ = c.Close()
	}
}

// ServeHTTP checks a request and serves the stream it asks for.
func (l *sseListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if reason, err := l.check(r); err != nil {
		l.refuse(w, r, reason, err)
		return
	}
	if r.Method == http.MethodOptions {
		browser.Preflight(w, r)
		return
	}
	l.serveStream(w, r)
}

// check applies the browser protections, then the path and the method,
// and returns the Reject* reason and an error carrying the HTTP status of
// a refusal.
func (l *sseListener) check(r *http.Request) (string, error) {
	g := l.s.guard
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if err := g.CheckHost([]byte(r.Host), local); err != nil {
		return labels.RejectHost, forbidden(err)
	}
	for _, origin := range r.Header.Values("Origin") {
		if err := g.CheckOrigin([]byte(origin)); err != nil {
			return labels.RejectOrigin, forbidden(err)
		}
	}
	if r.URL.Path != l.path {
		return labels.RejectPath, handshake.Refusal(http.StatusNotFound, fmt.Sprintf("no event stream at %q: this sse:// listener serves %q", r.URL.Path, l.path))
	}
	if r.Method != http.MethodGet && !browser.IsPreflight(r) {
		return labels.RejectBadRequest, handshake.Refusal(http.StatusMethodNotAllowed, fmt.Sprintf("method %s: an event stream is read with GET", r.Method))
	}
	if r.ContentLength != 0 {
		// net/http notices that a client went away only once the request
		// body is read: a stream requested with a body would not end with
		// its app. EventSource sends none.
		return labels.RejectBadRequest, handshake.Refusal(http.StatusBadRequest, "an event stream request has no body")
	}
	return "", nil
}

// refuse answers a request tether turns away, with the status its error
// carries (500 if none) and the reason in a one-line body, then closes the
// connection; the refusal is logged and counted.
func (l *sseListener) refuse(w http.ResponseWriter, r *http.Request, reason string, err error) {
	status := http.StatusInternalServerError
	var rej *ws.ConnectionRejectedError
	if errors.As(err, &rej) && rej.StatusCode() != 0 {
		status = rej.StatusCode()
	}
	l.log.Info("app request refused", zap.String("reason", reason), zap.Int("http_status", status),
		zap.String("remote", r.RemoteAddr), zap.Error(err))
	l.s.opts.Metrics.HandshakeRejected(reason)
	h := w.Header()
	h.Set("Connection", "close")
	if status == http.StatusMethodNotAllowed {
		h.Set("Allow", http.MethodGet)
	}
	http.Error(w, handshake.OneLine(err.Error()), status)
}
