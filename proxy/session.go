package proxy

import (
	"context"
	"errors"
	"sync"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// Session is one app connection and the logical upstream stream serving it. It
// implements upstream.Handler.
type Session struct {
	id   uint64
	srv  *Server
	log  *zap.Logger
	kind ListenerKind // the listener the app came in on

	ctx    context.Context // ends when the session ends
	cancel context.CancelFunc

	protocols           []string // offered by the app, in order
	upstreamURL         string   // the app's path joined onto the upstream URL (TETHER_FORWARD_PATH); "" for the URL as configured
	upstreamLastEventID string   // KindSSE: the sse:// app's own Last-Event-ID, resumed upstream
	admitted            bool     // counted against MaxSessions
	client              *upstream.Client
	app                 appConn
	sse                 *sseApp       // app, for an sse:// app; nil for the others
	appReady            chan struct{} // closed once app is set

	mu      sync.Mutex
	live    *upstream.Conn // restored connection taking direct sends; nil while down
	outbox  *buffer.Outbox
	restore restoreState // login, subscriptions, acks and replies (state.go)
	seq     seqState     // sequence numbers, gaps, resume (seqstate.go); its turn is taken before mu

	appProtocol   string // subprotocol the app was accepted with
	protocolKnown bool   // appProtocol is set

	readOnlyWarned bool // an app message was dropped for an SSE upstream (the reader only)
}

// appConn is the app's socket as a Session uses it: a *wsconn.Conn for a
// WebSocket app (ws and unix listeners), a *lineConn for a tcp:// app, an
// *sseApp for an sse:// app (which outlives the app's HTTP requests).
// ReadMessage is called by the session's reader only; the other methods are
// safe for concurrent use. Send copies p (the caller may reuse it) and
// blocks while the app's queue is full: the back-pressure on upstream reads.
type appConn interface {
	Send(ctx context.Context, op ws.OpCode, p []byte) error
	ReadMessage() (ws.OpCode, []byte, error)
	Close(code ws.StatusCode, reason string)
	Abort()
	Done() <-chan struct{}
	Queued() int64
}

func (s *Server) newSession(kind ListenerKind) *Session {
	id := s.nextID.Add(1)
	ctx, cancel := context.WithCancel(s.ctx)
	// Queued and unacknowledged messages share the outbox caps; the replay
	// log has caps of the same size, counted separately.
	budget := buffer.NewBudget(s.opts.OutboxMaxMessages, s.opts.OutboxMaxBytes)
	st := newRestoreState(&s.rules, s.opts.OutboxMaxMessages, s.opts.OutboxMaxBytes, budget, s.opts.OutboxOverflow)
	sess := &Session{
		id:       id,
		srv:      s,
		log:      s.log.With(zap.Uint64("session", id), zap.String("listener", string(kind))),
		kind:     kind,
		ctx:      ctx,
		cancel:   cancel,
		appReady: make(chan struct{}),
		outbox:   buffer.NewSharedOutbox(budget, st.pending, s.opts.OutboxOverflow),
		restore:  st,
	}
	if s.rules.seq.on {
		sess.seq.init(s.rules.seq.HoldMaxBytes)
	}
	return sess
}

// startClient creates and starts the session's upstream client.
func (sess *Session) startClient() {
	opts := sess.srv.opts.Upstream
	if sess.upstreamURL != "" {
		opts.URL = sess.upstreamURL
	}
	opts.LastEventID = sess.upstreamLastEventID
	opts.Handler = sess
	opts.Protocols = sess.protocols
	opts.Logger = sess.log.Named("upstream")
	c, err := upstream.New(opts)
	if err != nil {
		// Options are validated at start-up; reaching this is a programming error.
		panic(err)
	}
	sess.client = c
	c.Start(sess.ctx)
}

// serve runs the session after a successful handshake: the calling goroutine
// reads the app, a second one watches the upstream client. When either side
// ends, the other is closed, and serve returns once both have.
func (sess *Session) serve() {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sess.watchUpstream()
	}()
	sess.readApp()
	sess.cancel()
	sess.client.Close() // closes the live upstream connection with 1000
	sess.stopSequencing()
	<-watched
	sess.app.Close(ws.StatusNormalClosure, "")
	<-sess.app.Done()
}

// watchUpstream closes the app when the upstream client gives up, with the code
// that tells the app why (DESIGN.md "Close codes", "HTTP status on handshake").
func (sess *Session) watchUpstream() {
	select {
	case <-sess.client.Done():
	case <-sess.ctx.Done():
	}
	if sess.srv.ctx.Err() != nil {
		// Shutdown gave up waiting: cut the app now instead of waiting out
		// its closing handshake (the client has stopped with Err nil).
		sess.app.Abort()
		return
	}
	err := sess.client.Err()
	if err == nil {
		return
	}
	code, reason := appCloseFor(err)
	sess.log.Warn("upstream gave up, closing app", zap.Error(err), zap.Int("close_code", int(code)))
	sess.closeApp(code, reason)
}

// appCloseFor maps why the upstream client stopped to the app's close frame.
func appCloseFor(err error) (ws.StatusCode, string) {
	var ce *upstream.CloseError
	switch {
	case errors.As(err, &ce):
		return ws.StatusCode(ce.Code), ce.Reason
	case errors.Is(err, upstream.ErrAuthFailed):
		return ws.StatusPolicyViolation, err.Error() // "upstream rejected credentials (HTTP 401)"
	}
	return ws.StatusInternalServerError, err.Error()
}

// readApp forwards app messages until the app closes or fails.
func (sess *Session) readApp() {
	for {
		op, data, err := sess.app.ReadMessage()
		if err != nil {
			sess.logAppEnd(err)
			return
		}
		sess.countMessage(DirectionAppToUpstream)
		sess.fromApp(op, data)
	}
}

// logAppEnd logs why the app's side ended and counts the app message a
// limit refused, if that was the reason.
func (sess *Session) logAppEnd(err error) {
	var ce *wsconn.CloseError
	var pe *wsconn.ProtocolError
	var le *lineError
	var cut *partialLineError
	switch {
	case errors.As(err, &ce):
		sess.log.Info("app closed", zap.Int("close_code", int(ce.Code)), zap.String("close_reason", ce.Reason))
	case errors.As(err, &pe):
		if reason := protocolDrop(pe.Code); reason != "" {
			sess.srv.opts.Metrics.AppDropped(reason)
		}
		sess.log.Warn("app broke the protocol, closed", zap.Int("close_code", int(pe.Code)), zap.String("reason", pe.Reason))
	case errors.As(err, &le):
		sess.srv.opts.Metrics.AppDropped(le.Drop)
		sess.log.Warn("tcp app broke the line rules, closing it (tcp:// has no close frame; a WebSocket app would get this code)",
			zap.Int("close_code", int(le.Code)), zap.String("reason", le.Reason))
	case errors.As(err, &cut):
		sess.srv.opts.Metrics.AppDropped(DropUnterminated)
		sess.log.Info("tcp app disconnected inside a line; the bytes after its last newline were not sent", zap.Int("bytes", cut.n))
	case errors.Is(err, errSSELingerExpired):
		sess.log.Info("sse app did not reconnect in time, session ends", zap.Duration("linger", sess.srv.opts.SSELinger))
	case errors.Is(err, errSSEClosed):
		sess.log.Debug("sse app's session closed by tether")
	default:
		sess.log.Info("app connection ended", zap.Error(err))
	}
}

// fromApp sends one app message upstream, or queues it while no restored
// connection is live. Whether a connection is live and the push to the outbox
// are decided under one lock: Restore marks a connection live only once the
// outbox is empty under that lock, so a message pushed after a separate check
// could land behind a finished Restore and wait for the next reconnect, while
// later messages overtook it.
//
// The message is classified once, here. A login or (un)subscribe message is
// remembered for the restores, under the same lock: when no connection is
// live, the next restore sends it and it is not queued as well.
//
// An SSE upstream takes no messages: they are dropped (sseupstream.go).
func (sess *Session) fromApp(op ws.OpCode, data []byte) {
	if sess.srv.readOnly {
		sess.dropReadOnly(len(data))
		return
	}
	m := &appMessage{op: op, data: data, class: sess.srv.rules.classifyApp(data)}
	for {
		live := sess.enqueueUnlessLive(m)
		if live == nil {
			return
		}
		err := live.Send(sess.ctx, op, data)
		if err == nil || sess.ctx.Err() != nil {
			return
		}
		// live is closing: stop sending to it (Lost will agree) and try
		// again, which queues the message unless a newer one is live.
		sess.mu.Lock()
		if sess.live == live {
			sess.live = nil
		}
		sess.mu.Unlock()
		if m.class.ackID != "" {
			return // pending since the first try: the next restore re-sends it
		}
	}
}

// enqueueUnlessLive returns the live connection, or queues the message and
// returns nil when there is none, applying the overflow policy. Every drop is
// logged; under the close policy the app is closed with 1013.
//
// A login or (un)subscribe message is remembered first. With no live
// connection it is queued only when a restore in progress has already taken
// its snapshot; otherwise the next restore sends it. An acknowledged message
// sent directly becomes pending, under the same caps.
func (sess *Session) enqueueUnlessLive(m *appMessage) *upstream.Conn {
	sess.mu.Lock()
	if err := sess.rememberLocked(m); err != nil {
		sess.mu.Unlock()
		sess.replayLogFull()
		return nil
	}
	if sess.coveredLocked(m) {
		sess.mu.Unlock()
		return nil // a retry after a restore that replayed it
	}
	if live := sess.live; live != nil {
		dropped, sent, err := sess.sendingLocked(m, live)
		depth := sess.outbox.Len()
		sess.mu.Unlock()
		sess.reportDrops(dropped, err, depth)
		if !sent {
			return nil
		}
		return live
	}
	if m.class.restorable() && sess.restore.snapped == nil {
		sess.mu.Unlock()
		return nil // the next restore sends it
	}
	dropped, err := sess.outbox.Push(m.stored())
	depth := sess.outbox.Len()
	sess.mu.Unlock()
	sess.reportDrops(dropped, err, depth)
	return nil
}

// reportDrops logs and counts messages the outbox caps dropped, and closes
// the app when the close policy refused one.
func (sess *Session) reportDrops(dropped []buffer.Message, err error, depth int) {
	for _, d := range dropped {
		sess.log.Warn("outbox full, message dropped", zap.Stringer("policy", sess.srv.opts.OutboxOverflow),
			zap.Int("bytes", len(d.Data)), zap.Int("outbox_messages", depth))
	}
	if len(dropped) > 0 {
		sess.srv.opts.Metrics.DroppedFromOutbox(len(dropped))
	}
	if errors.Is(err, buffer.ErrOutboxFull) {
		sess.srv.opts.Metrics.DroppedFromOutbox(1) // the refused message
		sess.log.Warn("outbox full, closing app", zap.Int("outbox_messages", depth))
		sess.closeApp(statusTryAgainLater, "outbox full")
	}
}

// closeApp starts the app's closing handshake; the reader then ends the session.
func (sess *Session) closeApp(code ws.StatusCode, reason string) {
	select {
	case <-sess.appReady:
		sess.app.Close(code, reason)
	default:
	}
}

// statusTryAgainLater is close code 1013 (RFC 6455 registry), absent from gobwas.
const statusTryAgainLater ws.StatusCode = 1013

// protocolDrop names the Drop* reason of a WebSocket app message refused by
// a limit, or "" for other protocol errors.
func protocolDrop(code ws.StatusCode) string {
	switch code {
	case ws.StatusMessageTooBig:
		return DropTooLarge
	case ws.StatusInvalidFramePayloadData:
		return DropInvalidUTF8
	}
	return ""
}

// countMessage counts one message forwarded in direction (DirectionAppToUpstream
// or DirectionUpstreamToApp), labelled with the session's listener kind.
func (sess *Session) countMessage(direction string) {
	if direction == DirectionUpstreamToApp && sess.kind == ListenerTCP {
		// The line writer counts what it queues: it may have dropped this
		// message by policy, and Send returned nil all the same (lines.go).
		return
	}
	sess.srv.opts.Metrics.Message(direction, string(sess.kind))
}
