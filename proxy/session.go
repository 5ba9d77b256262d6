package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/sequence"
	"github.com/tetherproxy/tether/internal/transport"
	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// Session is one app connection and the logical upstream stream serving it.
// Its upstream client reaches it through upstreamHandler.
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
	sse                 *transport.SSEApp // app, for an sse:// app; nil for the others
	appReady            chan struct{}     // closed once app is set
	// acct is the session's account on Options.Budget, which its app
	// socket's queue counts on; nil without a budget. Closed by forget.
	acct *budget.Account

	// seq sequences upstream messages (internal/sequence); nil when
	// sequencing is off. It has its own locks: the session never
	// holds mu while calling it.
	seq *sequence.Sequencer
	// out holds upstream messages on their way to the app (handler.go):
	// the upstream reader's, or the holder's of seq's delivery turn.
	out appOut
	// up holds app messages on their way to the live connection
	// (upbatch.go): the app reader's.
	up upOut

	mu     sync.Mutex
	live   *upstream.Conn  // restored connection taking direct sends; nil while down
	outbox *buffer.Outbox  // app messages waiting for a live connection
	state  *protocol.State // login, subscriptions, acks and replies, as the protocol read them
	// snapped is the connection whose restore has taken its snapshot of the
	// login and the replay log, until it goes live or is lost. App logins
	// and (un)subscriptions arriving meanwhile are missing from that
	// snapshot, so they are also queued, as copies the next snapshot
	// discards. epoch counts snapshots: a message remembered in an older
	// epoch is in the current connection's snapshot already, and is neither
	// sent nor queued again.
	snapped *upstream.Conn
	epoch   uint64

	subprotocol appSubprotocol // the one the app was accepted with

	readOnly readOnlyDrops // app messages an SSE upstream cannot take (the reader only)

	// The upstream reader's Framer (Capabilities.Framing) and the
	// connection it frames; only the reader of that connection uses it.
	upFramer    protocol.Framer
	upFramerGen uint64

	started time.Time
	tally   sequence.Tally // the sequencing's counts for Status, passed on to the Server's Metrics

	beat *beater // the protocol's keepalive beats toward the app (keepalive.go)
}

// appConn is the app's socket as a Session uses it: a *wsconn.Conn for a
// WebSocket app (ws and unix listeners), a *transport.LineConn for a tcp://
// app, a *transport.SSEApp for an sse:// app (which outlives the app's HTTP
// requests). ReadMessage is called by the session's reader only; Append by
// the holder of the session's batch (the delivery turn, appOut); the other
// methods are safe for concurrent use.
//
// Upstream messages reach the app in batches (handler.go): Append encodes a
// message into a sendq.Batch for this socket, copying p, and SendBatch
// queues the batch, blocking while the app's queue is full: the
// back-pressure on upstream reads. SendBatch returns how many of the
// batch's messages it queued: all, or with an error those before it (a
// WebSocket or tcp:// app queues a batch whole; an sse:// app event by
// event). Send queues one message on its own, for what tether writes on
// its own behalf outside the delivery turn (keepalive.go); it copies p and
// blocks as SendBatch does.
//
// A WebSocket app passes whole frames on as they arrived (wsconn.Conn's
// Frame and AppendFrame): the reader gets the frame of the message it just
// read with Frame (nil when there is none, and always for the others), and
// AppendFrame adds an upstream frame to a batch, as it is on a WebSocket
// app, as the message it carries on the others. ReadMessageFlushing is
// ReadMessage for a reader that batches what it reads (upbatch.go).
type appConn interface {
	ReadMessageFlushing(flush func()) (ws.OpCode, []byte, error)
	Frame() []byte
	Send(ctx context.Context, op ws.OpCode, p []byte) error
	Append(b *sendq.Batch, op ws.OpCode, p []byte)
	AppendFrame(b *sendq.Batch, frame []byte) bool
	SendBatch(ctx context.Context, b *sendq.Batch) (int, error)
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
	caps := buffer.NewBudget(s.opts.OutboxMaxMessages, s.opts.OutboxMaxBytes)
	limits := protocol.Limits{
		MaxMessages: s.opts.OutboxMaxMessages, MaxBytes: s.opts.OutboxMaxBytes,
		Budget: caps, Overflow: s.opts.OutboxOverflow,
	}
	var acct *budget.Account
	if s.opts.Budget != nil {
		// The session's queues towards its app, its outbox, its messages
		// awaiting acknowledgement, its replay log and (newSequencer) its
		// held messages count on one account.
		acct = s.opts.Budget.Open()
		caps.SetMeter(acct)
		limits.Meter = acct
	}
	st := protocol.NewState(s.rules.caps, limits)
	sess := &Session{
		id:       id,
		srv:      s,
		log:      sessionLogger(s.log, id, kind),
		kind:     kind,
		ctx:      ctx,
		cancel:   cancel,
		appReady: make(chan struct{}),
		beat:     newBeater(s.rules.caps.Keepalive),
		outbox:   buffer.NewSharedOutbox(caps, st.Pending(), s.opts.OutboxOverflow),
		state:    st,
		started:  time.Now(),
		tally:    sequence.Tally{Metrics: s.opts.Metrics},
		acct:     acct,
	}
	if s.rules.seq.on {
		sess.seq = sess.newSequencer()
	}
	return sess
}

// shareUpstream is the upstream client options every session shares:
// Options.Upstream with the protocol's predicates.
func shareUpstream(opts Options, rules ruleSet) (*upstream.Shared, error) {
	up := opts.Upstream
	up.Confirm, up.HeartbeatReply = rules.caps.Confirm, rules.caps.HeartbeatReply
	// A protocol with a login gets the heartbeat message only after it
	// (restore.go, fromApp).
	up.HeartbeatAfterLogin = opts.Protocol != nil || opts.Rules.AuthMatch != nil
	return upstream.Share(up)
}

// startClient creates and starts the session's upstream client.
func (sess *Session) startClient() {
	c, err := sess.srv.upstream.New(upstream.Session{
		URL:         sess.upstreamURL, // "" for the URL as configured
		LastEventID: sess.upstreamLastEventID,
		Protocols:   sess.protocols,
		Handler:     upstreamHandler{sess},
		Account:     sess.acct, // the queue towards the upstream, and reassembly
		Logger:      sess.log.Named("upstream"),
		Stopped:     sess.upstreamStopped,
		// The session ends with the client: every Close follows
		// sess.cancel. So the client runs on the session's context.
		Cancel: sess.cancel,
	})
	if err != nil {
		// The Handler is set: reaching this is a programming error.
		panic(err)
	}
	sess.client = c
	c.Start(sess.ctx)
}

// serve runs the session after a successful handshake: the calling goroutine
// reads the app. The upstream client closes the app when it gives up
// (upstreamStopped, called from its own goroutine), so an idle session
// keeps no goroutine of its own waiting for that; only a protocol with
// keepalive beats has one, sending them. When the app leaves, serve stops
// the client and returns once the client and the beats have.
func (sess *Session) serve() {
	var beating chan struct{} // nil: no beats
	if sess.beat.on() {
		beating = make(chan struct{})
		go func() {
			defer close(beating)
			sess.beat.run(sess.ctx, sess.client.Done(), sess.isLive, sess.toApp) // until the client stops or the session ends
		}()
	}
	if sess.srv.ctx.Err() != nil {
		// Shutdown gave up waiting before this app was set, so cutApps
		// did not cut it: cut it now.
		sess.app.Abort()
	}
	sess.readApp()
	sess.cancel()
	sess.client.Close() // closes the live upstream connection with 1000
	if sess.seq != nil {
		// The upstream reader is gone: stop the gap timers and catch-ups,
		// and wait for those under way.
		sess.seq.Stop()
	}
	if beating != nil {
		<-beating
	}
	sess.reportUnsent()
	sess.app.Close(ws.StatusNormalClosure, "")
	<-sess.app.Done()
}

// reportUnsent logs and counts the app messages still in the outbox when the
// session ends: the app left before any upstream connection took them
// (docs/design.md "Outbox"). Nothing sends them afterwards.
func (sess *Session) reportUnsent() {
	sess.mu.Lock()
	n, bytes := sess.outbox.Len(), sess.outbox.Bytes()
	sess.mu.Unlock()
	if n == 0 {
		return
	}
	for range n {
		sess.srv.opts.Metrics.AppDropped(labels.DropUnsent)
	}
	sess.log.Warn("app left with messages never sent upstream, dropped", zap.Int("messages", n), zap.Int("bytes", bytes))
}

// upstreamStopped closes the app when the upstream client gives up, with the
// code that tells the app why (docs/design.md "Close codes", "HTTP status on
// handshake"). The client calls it from its goroutine as it stops
// (upstream.Options.Stopped), err nil when the session stopped it. A client
// that gives up while the app's handshake is still being answered waits for
// the app socket, or for the session's end when the handshake fails.
func (sess *Session) upstreamStopped(err error) {
	if err == nil {
		return
	}
	select {
	case <-sess.appReady:
	case <-sess.ctx.Done():
		return
	}
	code, reason := appCloseFor(err)
	sess.log.Warn("upstream gave up, closing app", zap.Error(err), zap.Int("close_code", int(code)))
	sess.closeApp(code, reason)
}

// appCloseFor maps why the upstream client stopped to the app's close frame.
func appCloseFor(err error) (ws.StatusCode, string) {
	var ce *upstream.CloseError
	var broken *upstream.BrokenCloseError
	switch {
	case errors.As(err, &ce):
		return ws.StatusCode(ce.Code), ce.Reason
	case errors.As(err, &broken):
		return ws.StatusProtocolError, err.Error() // 1002, naming the problem and the code
	case errors.Is(err, upstream.ErrAuthFailed):
		return ws.StatusPolicyViolation, err.Error() // "upstream rejected credentials (HTTP 401)"
	}
	return ws.StatusInternalServerError, err.Error()
}

// readApp forwards app messages until the app closes or fails.
func (sess *Session) readApp() {
	var fr protocol.Framer
	if split := sess.srv.rules.caps.Framing; split != nil {
		fr = split()
	}
	flush := sess.flushUp // bound once: a method value per read would allocate
	for {
		op, data, err := sess.app.ReadMessageFlushing(flush)
		if err != nil {
			sess.flushUp()
			sess.logAppEnd(err)
			return
		}
		sess.srv.countMessages(sess.kind, labels.DirectionAppToUpstream, 1)
		if fr == nil {
			sess.fromAppWhole(op, data)
		} else if !sess.fromAppSplit(fr, op, data) {
			sess.flushUp()
			return
		}
	}
}

// logAppEnd logs why the app's side ended and counts the app message a
// limit refused, if that was the reason.
func (sess *Session) logAppEnd(err error) {
	var ce *wsconn.CloseError
	var pe *wsconn.ProtocolError
	var le *transport.LineError
	var cut *transport.PartialLineError
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
		sess.srv.opts.Metrics.AppDropped(labels.DropUnterminated)
		sess.log.Info("tcp app disconnected inside a line; the bytes after its last newline were not sent", zap.Int("bytes", cut.Bytes))
	case errors.Is(err, transport.ErrSSELingerExpired):
		sess.log.Info("sse app did not reconnect in time, session ends", zap.Duration("linger", sess.srv.opts.SSELinger))
	case errors.Is(err, transport.ErrSSEClosed):
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
	if m, ok := sess.classify(op, data); ok {
		sess.route(&m)
	}
}

// classify is an app message with its class, when the protocol reads app
// messages; false when the upstream takes none, the message dropped and
// counted (read-only).
func (sess *Session) classify(op ws.OpCode, data []byte) (appMessage, bool) {
	if sess.srv.readOnly {
		sess.readOnly.drop(sess.srv.opts.Metrics, sess.log, len(data))
		return appMessage{}, false
	}
	m := appMessage{op: op, data: data}
	if rs := &sess.srv.rules; rs.caps.ReadsApp {
		m.class = rs.proto.App(data)
	}
	return m, true
}

// route sends or queues m, after what the reader batched (upbatch.go).
func (sess *Session) route(m *appMessage) {
	sess.flushUp()
	sess.sendOn(sess.enqueueUnlessLive(m), m)
}

// sendOn sends m on live, the connection enqueueUnlessLive chose for it
// (nil: it queued or dropped m), and routes m again while the connection
// it tried is closing.
func (sess *Session) sendOn(live *upstream.Conn, m *appMessage) {
	for live != nil {
		err := live.Send(sess.ctx, m.op, m.data)
		if err == nil && m.class.Kind == protocol.AppLogin {
			live.LoggedIn() // queued behind the login: the heartbeat message may follow
		}
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
		if m.class.AckID != "" {
			return // pending since the first try: the next restore re-sends it
		}
		if sess.srv.rules.answersKeepalive(m) {
			return // recorded on live: its loss answers it (Lost)
		}
		live = sess.enqueueUnlessLive(m)
	}
}

// enqueueUnlessLive returns the live connection, or queues the message and
// returns nil when there is none, applying the overflow policy. Every drop is
// logged; under the close policy the app is closed with 1013.
//
// An app keepalive the protocol answers (Keepalive.Answer) is answered
// with no live connection, and recorded as sent with one. One that answers
// the upstream's ping (Keepalive.OnlyAsked) goes only to a live connection
// that pinged since the app's last answer. An app message
// settling an upstream message (protocol.App.DeliveryID) goes only to the
// connection that delivered it; otherwise it is dropped.
//
// A login or (un)subscribe message is remembered first. With no live
// connection it is queued only when a restore in progress has already taken
// its snapshot; otherwise the next restore sends it. An acknowledged message
// sent directly becomes pending, under the same caps.
func (sess *Session) enqueueUnlessLive(m *appMessage) *upstream.Conn {
	sess.mu.Lock()
	if m.class.IfActive && !m.remembered && !sess.state.Active(m.class.Key) {
		sess.mu.Unlock()
		sess.srv.opts.Metrics.AppDropped(labels.DropEnded)
		sess.log.Debug("app unsubscribe for a subscription no longer active, not sent", zap.Int("bytes", len(m.data)))
		return nil
	}
	if m.class.DeliveryID != "" && !sess.settles(m.class.DeliveryID) {
		sess.mu.Unlock()
		sess.srv.opts.Metrics.AppDropped(labels.DropStale)
		sess.log.Debug("app settles a message of a lost connection, not sent", zap.Int("bytes", len(m.data)))
		return nil
	}
	if err := m.remember(sess.state, sess.epoch, sess.live == nil && sess.snapped == nil); err != nil {
		sess.mu.Unlock()
		sess.replayLogFull()
		return nil
	}
	if m.covered(sess.epoch) {
		sess.mu.Unlock()
		return nil // a retry after a restore that replayed it
	}
	if sess.srv.rules.answersKeepalive(m) {
		if live := sess.live; live != nil {
			sess.state.KeepaliveSent(live.Gen(), m.data)
			sess.mu.Unlock()
			return live
		}
		sess.mu.Unlock()
		sess.toApp("app keepalive answered while the upstream is down", sess.srv.rules.caps.Keepalive.Answer(m.data))
		return nil
	}
	if sess.live == nil && m.class.Kind == protocol.AppKeepalive && sess.srv.rules.caps.Keepalive.DropWhileDown {
		sess.mu.Unlock()
		sess.srv.opts.Metrics.AppDropped(labels.DropKeepalive)
		sess.log.Debug("app keepalive while the upstream is down, not queued", zap.Int("bytes", len(m.data)))
		return nil
	}
	if live := sess.live; live != nil && m.class.Kind == protocol.AppKeepalive &&
		sess.srv.rules.caps.Keepalive.OnlyAsked && !sess.state.Asked(live.Gen()) {
		sess.mu.Unlock()
		sess.srv.opts.Metrics.AppDropped(labels.DropKeepalive)
		sess.log.Debug("app keepalive the upstream did not ask for, not sent", zap.Uint64("gen", live.Gen()), zap.Int("bytes", len(m.data)))
		return nil
	}
	if live := sess.live; live != nil {
		dropped, sent, err := m.sending(sess.state, live)
		depth := sess.outbox.Len()
		sess.mu.Unlock()
		sess.reportDrops(dropped, err, depth)
		if !sent {
			return nil
		}
		return live
	}
	if m.class.Restorable() && sess.snapped == nil {
		sess.mu.Unlock()
		return nil // the next restore sends it
	}
	dropped, err := sess.outbox.Push(m.stored())
	depth := sess.outbox.Len()
	sess.mu.Unlock()
	sess.reportDrops(dropped, err, depth)
	return nil
}

// settles reports whether the connection that delivered the upstream
// message the app settles with id (protocol.App.DeliveryID) is the live
// one, or the one being restored, whose queue is flushed onto it.
// Session.mu is held.
func (sess *Session) settles(id string) bool {
	c := sess.live
	if c == nil {
		c = sess.snapped
	}
	return c != nil && sess.state.Delivered(c.Gen(), id)
}

// reportDrops logs and counts messages the outbox caps dropped, and closes
// the app when the close policy refused one.
func (sess *Session) reportDrops(dropped []buffer.Message, err error, depth int) {
	for _, d := range dropped {
		sess.log.Warn("outbox full, message dropped", zap.Stringer("policy", sess.srv.opts.OutboxOverflow),
			zap.Int("bytes", len(d.Data)), zap.Int("outbox_messages", depth), sess.memoryField())
	}
	if len(dropped) > 0 {
		sess.srv.opts.Metrics.DroppedFromOutbox(len(dropped))
	}
	if errors.Is(err, buffer.ErrOutboxFull) {
		sess.srv.opts.Metrics.DroppedFromOutbox(1) // the refused message
		sess.log.Warn("outbox full, closing app", zap.Int("outbox_messages", depth), sess.memoryField())
		sess.closeApp(statusTryAgainLater, "outbox full")
	}
}

// memoryField says, in an outbox drop's or a full replay log's log line,
// whether the memory budget (TETHER_MEMORY_LIMIT) refused rather than the
// caps: the bytes the
// session holds on it, and whether its pool was spent.
func (sess *Session) memoryField() zap.Field {
	b := sess.srv.opts.Budget
	if b == nil {
		return zap.Skip()
	}
	return zap.Dict("memory_budget", zap.Int64("session_held", sess.acct.Held()), zap.Bool("full", b.Full()))
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
		return labels.DropTooLarge
	case ws.StatusInvalidFramePayloadData:
		return labels.DropInvalidUTF8
	}
	return ""
}

// countMessages counts n messages forwarded in direction
// (DirectionAppToUpstream or DirectionUpstreamToApp), labelled with the
// listener kind of their session.
func (s *Server) countMessages(kind ListenerKind, direction string, n int) {
	if direction == labels.DirectionUpstreamToApp && kind == ListenerTCP {
		// The line writer counts what it queues: it drops messages by
		// policy, and a close policy queues the batch before it
		// (transport.LineConn).
		return
	}
	s.opts.Metrics.Forwarded(direction, string(kind), n)
}
