package proxy

import (
	"errors"
	"fmt"
	"github.com/tetherproxy/tether/internal/browser"
	"net/http"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/handshake"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/sequence"
	"github.com/tetherproxy/tether/internal/transport"
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
// Events from an SSE upstream carry the upstream's own ids (in either
// TETHER_SSE_FORMAT), and with sequencing those of numbered messages are
// "<stream>:<seq>" (sequence.EventID), so a Last-Event-ID may be one of
// those: a lingering session whose buffer holds it resumes after it in the
// same way (sseSessionHolding).
// Any other Last-Event-ID starts a new session whose stream begins with a
// tether-gap event saying why the app's position could not be kept
// (transport's sseid.go): tether cannot hide that gap, so it says so. The exception is
// an id that is not tether's in front of an SSE upstream: the new session's
// upstream is asked to resume after it (upstream.Options.LastEventID).
// Every Last-Event-ID's outcome is counted (Metrics.SSEResumed).

// serveStream serves a checked request: it resumes a lingering session or
// starts one, then writes the stream until the app goes.
func (l *sseListener) serveStream(w http.ResponseWriter, r *http.Request) {
	att := transport.NewSSEAttachment(w)
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
func (l *sseListener) resume(r *http.Request, att *transport.SSEAttachment) (*Session, string) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		return nil, ""
	}
	sess, n, gap := l.s.sseSessionOf(last)
	if sess == nil {
		return nil, gap
	}
	lost, ok := sess.sse.Attach(att, n, true, "")
	switch {
	case !ok:
		return nil, transport.GapSessionGone
	case lost > 0:
		l.s.opts.Metrics.SSEResumed(labels.SSEEvicted)
		sess.log.Warn("sse app reconnected after events its session no longer holds; tether-gap sent",
			zap.String("remote", r.RemoteAddr), zap.Uint64("after", n), zap.Uint64("lost", lost))
	default:
		l.s.opts.Metrics.SSEResumed(labels.SSEResumed)
		sess.log.Info("sse app reconnected, stream resumed", zap.String("remote", r.RemoteAddr), zap.Uint64("after", n))
	}
	return sess, ""
}

// sseSessionOf returns the lingering session a Last-Event-ID names and the
// number of its event with that id, or nil and why none does, as a gap
// reason: session_gone for an id tether wrote ("<token>-<n>", or with
// sequencing "<stream>:<seq>"), foreign_id for any other.
func (s *Server) sseSessionOf(id string) (*Session, uint64, string) {
	if token, n, ok := transport.ParseEventID(id); ok {
		if sess := s.sseSession(token); sess != nil {
			return sess, n, ""
		}
		return nil, 0, transport.GapSessionGone
	}
	if sess, n := s.sseSessionHolding(id); sess != nil {
		return sess, n, ""
	}
	if _, _, ok := sequence.ParseEventID(id); ok && s.rules.seq.on && s.opts.Upstream.Kind != upstream.KindSSE {
		return nil, 0, transport.GapSessionGone
	}
	return nil, 0, transport.GapForeignID
}

// start admits a new session, dials its upstream and attaches att to it,
// or refuses the request and returns nil.
func (l *sseListener) start(w http.ResponseWriter, r *http.Request, att *transport.SSEAttachment, gap string) *Session {
	s := l.s
	sess := s.newSession(ListenerSSE)
	if gap == transport.GapForeignID && s.opts.Upstream.Kind == upstream.KindSSE {
		// Not one of tether's ids: with an SSE upstream it is most likely
		// the upstream's own (the app read the feed directly before), so
		// the new session's upstream resumes after it. No gap to report:
		// the upstream's history decides, as it would for the app.
		sess.upstreamLastEventID = r.Header.Get("Last-Event-ID")
		gap = ""
		s.opts.Metrics.SSEResumed(labels.SSEUpstream)
	}
	s.countGap(r, gap)
	if reason, err := s.admit(sess); err != nil {
		sess.cancel()
		l.refuse(w, r, reason, err)
		return nil
	}
	sess.admitted = true
	res, answered := sess.firstDial()
	switch {
	case answered && res.Err == nil:
		sess.subprotocol.set(res.Protocol)
	case answered && res.Permanent:
		// Before client.Close: the upstream reader may wait for the app.
		sess.cancel()
		sess.client.Close()
		s.forget(sess)
		l.refuse(w, r, labels.RejectUpstreamPermanent, handshake.Refusal(http.StatusBadGateway, fmt.Sprintf("upstream refused the connection: %v", res.Err)))
		return nil
	}
	app := transport.NewSSEApp(s.sseOptions(sess.log, sess.acct))
	sess.app, sess.sse = app, app
	close(sess.appReady)
	app.Attach(att, 0, false, gap) // a new session is not closing: it attaches
	s.registerSSE(app.Token(), sess)
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

// countGap counts the gap reason a new session's stream starts with, and
// warns of a Last-Event-ID tether cannot read at all: the app, or what
// stands between it and tether, is not the EventSource it seems, and its
// stream starts live.
func (s *Server) countGap(r *http.Request, gap string) {
	switch gap {
	case transport.GapSessionGone:
		s.opts.Metrics.SSEResumed(labels.SSESessionGone)
	case transport.GapForeignID:
		s.opts.Metrics.SSEResumed(labels.SSEForeignID)
		s.log.Warn("sse app's Last-Event-ID is not an id tether or its upstream writes; its stream starts live, after a tether-gap",
			zap.String("remote", r.RemoteAddr), zap.String("last_event_id", clip(r.Header.Get("Last-Event-ID"), 64)))
	}
}

// clip cuts s to at most n bytes, at a character boundary, for a log
// field of untrusted text.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// respond writes the stream's headers, then the stream, until the app
// goes, a newer request replaces this one, or the session ends.
func (l *sseListener) respond(w http.ResponseWriter, r *http.Request, sess *Session, att *transport.SSEAttachment) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// nginx buffers proxied responses unless told not to: an event stream
	// must reach the app as each event is written.
	h.Set("X-Accel-Buffering", "no")
	if origin := r.Header.Get("Origin"); origin != "" {
		browser.AllowOrigin(h, origin) // checked already: the page may read the stream
	}
	w.WriteHeader(http.StatusOK)
	lingers, err := sess.sse.Stream(r.Context(), w, att)
	switch {
	case err == nil || errors.Is(err, transport.ErrSSEClosed):
		sess.log.Debug("sse stream ended by tether", zap.String("remote", r.RemoteAddr))
	case errors.Is(err, transport.ErrSSEReplaced):
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
	defer s.unregisterSSE(sess.sse.Token())
	if s.isDraining() {
		// As for a WebSocket app: Shutdown may have passed over this
		// session while its first dial was awaited.
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
	sess.serve()
}

// sseOptions configures a new sse:// session's app side.
func (s *Server) sseOptions(log *zap.Logger, acct *budget.Account) transport.SSEOptions {
	o := s.opts
	return transport.SSEOptions{
		Account:    acct,
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

// sseSessionHolding returns the sse:// session whose buffer holds the
// event with the upstream's id, and that event's number; nil when none
// does. Several sessions of one feed may hold the same id: one no request
// is attached to (the app that went away) is taken, or the only one; when
// that leaves a choice, none is, and the new session resumes upstream.
// The sessions are asked without s.mu held.
func (s *Server) sseSessionHolding(id string) (*Session, uint64) {
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sseTokens))
	for _, sess := range s.sseTokens {
		all = append(all, sess)
	}
	s.mu.Unlock()
	var found, detached []*Session
	var at, detachedAt []uint64
	for _, sess := range all {
		n, attached, ok := sess.sse.HoldsID(id)
		if !ok {
			continue
		}
		found, at = append(found, sess), append(at, n)
		if !attached {
			detached, detachedAt = append(detached, sess), append(detachedAt, n)
		}
	}
	switch {
	case len(detached) == 1:
		return detached[0], detachedAt[0]
	case len(found) == 1:
		return found[0], at[0]
	}
	return nil, 0
}

// sseSession returns the sse:// session of token, or nil.
func (s *Server) sseSession(token string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sseTokens[token]
}
