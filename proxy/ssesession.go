package proxy

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream"
)

// Sessions of an sse:// listener. A request without a Last-Event-ID the
// listener can resume starts a session as a WebSocket handshake does:
// admission (503 when full or draining), then the first dial, awaited up to
// AcceptWait (502 when the upstream refuses for good). The session then
// runs on its own goroutine, not the request's: it outlives the request by
// up to Options.SSELinger, waiting for the app's EventSource to reconnect.
//
// A request whose Last-Event-ID is "<token>-<n>" of a session still here
// attaches to it instead: no admission, no dial, the events after n are
// written again, then the live ones. Nothing is lost, nothing repeated.
// Any other Last-Event-ID starts a new session whose stream begins with a
// tether-gap event saying why the app's position could not be kept
// (sseid.go): tether cannot hide that gap, so it says so. The exception is
// an id that is not tether's in front of an SSE upstream: the new session's
// upstream is asked to resume after it (upstream.Options.LastEventID).

// serveStream serves a checked request: it resumes a lingering session or
// starts one, then writes the stream until the app goes.
func (l *sseListener) serveStream(w http.ResponseWriter, r *http.Request) {
	att := newAttachment(w)
	sess, gap := l.resume(r, att)
	if sess == nil {
		if sess = l.start(w, r, att, gap); sess == nil {
			return
		}
	}
	l.respond(w, r, sess, att)
}

// resume attaches att to the lingering session the request's Last-Event-ID
// names. When there is none, it returns the gap reason the new session's
// stream must start with ("" when the request named no position).
func (l *sseListener) resume(r *http.Request, att *sseAttachment) (*Session, string) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		return nil, ""
	}
	token, n, ok := parseEventID(last)
	if !ok {
		return nil, gapForeignID
	}
	sess := l.s.sseSession(token)
	if sess == nil {
		return nil, gapSessionGone
	}
	lost, ok := sess.sse.attach(att, n, true, "")
	switch {
	case !ok:
		return nil, gapSessionGone
	case lost > 0:
		sess.log.Warn("sse app reconnected after events its session no longer holds; tether-gap sent",
			zap.String("remote", r.RemoteAddr), zap.Uint64("after", n), zap.Uint64("lost", lost))
	default:
		sess.log.Info("sse app reconnected, stream resumed", zap.String("remote", r.RemoteAddr), zap.Uint64("after", n))
	}
	return sess, ""
}

// start admits a new session, dials its upstream and attaches att to it,
// or refuses the request and returns nil.
func (l *sseListener) start(w http.ResponseWriter, r *http.Request, att *sseAttachment, gap string) *Session {
	s := l.s
	sess := s.newSession(ListenerSSE)
	if gap == gapForeignID && s.opts.Upstream.Kind == upstream.KindSSE {
		// Not one of tether's ids: with an SSE upstream it is most likely
		// the upstream's own (the app read the feed directly before), so
		// the new session's upstream resumes after it. No gap to report:
		// the upstream's history decides, as it would for the app.
		sess.upstreamLastEventID = r.Header.Get("Last-Event-ID")
		gap = ""
	}
	if reason, err := s.admit(sess); err != nil {
		sess.cancel()
		l.refuse(w, r, reason, err)
		return nil
	}
	sess.admitted = true
	res, answered := sess.firstDial()
	switch {
	case answered && res.Err == nil:
		sess.setAppProtocol(res.Protocol)
	case answered && res.Permanent:
		// Before client.Close: the upstream reader may wait for the app.
		sess.cancel()
		sess.client.Close()
		s.forget(sess)
		l.refuse(w, r, RejectUpstreamPermanent, refusal(http.StatusBadGateway, fmt.Sprintf("upstream refused the connection: %v", res.Err)))
		return nil
	}
	app := newSSEApp(s.sseOptions(sess.log))
	sess.app, sess.sse = app, app
	close(sess.appReady)
	app.attach(att, 0, false, gap) // a new session is not closing: it attaches
	s.registerSSE(app.token, sess)
	// The request's connection counts in its listener's wait group, which
	// the server waits for: this Add cannot race Shutdown's Wait.
	s.wg.Add(1)
	go s.runSSE(sess)
	fields := []zap.Field{zap.String("remote", r.RemoteAddr), zap.Bool("upstream_connected", answered && res.Err == nil)}
	if gap != "" {
		fields = append(fields, zap.String("gap", gap))
	}
	sess.log.Info("app connected", fields...)
	return sess
}

// respond writes the stream's headers, then the stream, until the app
// goes, a newer request replaces this one, or the session ends.
func (l *sseListener) respond(w http.ResponseWriter, r *http.Request, sess *Session, att *sseAttachment) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// nginx buffers proxied responses unless told not to: an event stream
	// must reach the app as each event is written.
	h.Set("X-Accel-Buffering", "no")
	if origin := r.Header.Get("Origin"); origin != "" {
		allowOrigin(h, origin) // checked already: the page may read the stream
	}
	w.WriteHeader(http.StatusOK)
	err := sess.sse.stream(r.Context(), w, att)
	lingers := sess.sse.detach(att)
	switch {
	case err == nil || errors.Is(err, errSSEClosed):
		sess.log.Debug("sse stream ended by tether", zap.String("remote", r.RemoteAddr))
	case errors.Is(err, errSSEReplaced):
		sess.log.Info("sse request replaced by the app's newer one", zap.String("remote", r.RemoteAddr))
	case lingers:
		sess.log.Info("sse app disconnected; its session waits for it to reconnect",
			zap.String("remote", r.RemoteAddr), zap.Duration("linger", l.s.opts.SSELinger), zap.NamedError("cause", err))
	default:
		sess.log.Info("sse app disconnected", zap.String("remote", r.RemoteAddr), zap.NamedError("cause", err))
	}
}

// runSSE runs an sse:// session from its first request to its end, which
// comes when the app stays away longer than the linger time, the upstream
// gives up, or the server drains.
func (s *Server) runSSE(sess *Session) {
	defer s.wg.Done()
	defer s.forget(sess)
	defer s.unregisterSSE(sess.sse.token)
	if s.isDraining() {
		// As for a WebSocket app: Shutdown may have passed over this
		// session while its first dial was awaited.
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
	sess.serve()
}

// sseOptions configures a new sse:// session's app side.
func (s *Server) sseOptions(log *zap.Logger) sseOptions {
	o := s.opts
	return sseOptions{
		QueueBytes: o.DownstreamBufferBytes,
		Linger:     o.SSELinger,
		KeepAlive:  s.sseKeepAlive(),
		JSON:       s.sseJSON,
		Log:        log,
	}
}

// registerSSE makes a session reachable by its token.
func (s *Server) registerSSE(token string, sess *Session) {
	s.mu.Lock()
	s.sseTokens[token] = sess
	s.mu.Unlock()
}

func (s *Server) unregisterSSE(token string) {
	s.mu.Lock()
	delete(s.sseTokens, token)
	s.mu.Unlock()
}

// sseSession returns the sse:// session of token, or nil.
func (s *Server) sseSession(token string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sseTokens[token]
}
