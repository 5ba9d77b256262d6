package proxy

import (
	"fmt"
	"net"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/transport"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// BinaryPolicy and NewlinePolicy, Options.TCPBinary and TCPNewline, are the
// tcp:// transport's (transport.BinaryPolicy, transport.NewlinePolicy),
// named here so that configuring a Server takes no internal import.
type (
	BinaryPolicy  = transport.BinaryPolicy
	NewlinePolicy = transport.NewlinePolicy
)

// The policies' values; the transport documents each.
const (
	BinaryBase64 = transport.BinaryBase64
	BinaryDrop   = transport.BinaryDrop
	BinaryClose  = transport.BinaryClose

	NewlineSpace = transport.NewlineSpace
	NewlineDrop  = transport.NewlineDrop
	NewlineClose = transport.NewlineClose
)

// handleLines serves one tcp:// app from accept to close. There is no
// handshake to hold the app in, so admission and the first dial happen
// here, as a WebSocket app's OnBeforeUpgrade does them: the app's first
// lines wait in the socket meanwhile.
func (s *Server) handleLines(nc net.Conn) {
	sess := s.newSession(ListenerTCP)
	if !sess.acceptLines(nc) {
		_ = nc.Close()
		return
	}
	defer s.forget(sess)
	if s.isDraining() {
		// As for a WebSocket app: Shutdown may have passed over this
		// session while it waited for the first dial.
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
	sess.serve()
}

// acceptLines admits a tcp:// app and waits up to AcceptWait for the first
// dial. A refusal, which a WebSocket app would get as an HTTP status, can
// only be logged and counted before the socket is closed.
func (sess *Session) acceptLines(nc net.Conn) bool {
	s := sess.srv
	if reason, err := s.admit(sess); err != nil {
		sess.refuseLines(reason, err)
		return false
	}
	sess.admitted = true
	r, answered := sess.firstDial()
	switch {
	case answered && r.Err == nil:
		sess.subprotocol.set(r.Protocol)
	case answered && r.Permanent:
		sess.refuseLines(labels.RejectUpstreamPermanent, fmt.Errorf("upstream refused the connection: %w", r.Err))
		return false
	}
	sess.app = transport.NewLineConn(nc, sess.srv.lineOptions(sess.log, sess.acct))
	close(sess.appReady)
	sess.log.Info("app connected", zap.String("remote", remoteAddr(nc)), zap.Bool("upstream_connected", answered && r.Err == nil))
	return true
}

// refuseLines logs and counts a tcp:// app turned away, and frees what
// admission took.
func (sess *Session) refuseLines(reason string, err error) {
	s := sess.srv
	sess.log.Info("tcp app refused, closing its socket (tcp:// has no way to say why)",
		zap.String("reason", reason), zap.Error(err))
	s.opts.Metrics.HandshakeRejected(reason)
	sess.cancel()
	if sess.admitted {
		sess.client.Close()
		s.forget(sess)
	}
}

// lineOptions configures a tcp:// app's socket from the server's options;
// log and acct (its share of the memory budget, nil without one) are its
// session's.
func (s *Server) lineOptions(log *zap.Logger, acct *budget.Account) transport.LineOptions {
	o := s.opts
	m := o.Metrics
	return transport.LineOptions{
		MaxLineBytes: o.MaxMessageBytes,
		QueueBytes:   o.DownstreamBufferBytes,
		CloseWait:    wsconn.DefaultCloseWait, // as for a WebSocket app's closing handshake
		Binary:       o.TCPBinary,
		Newline:      o.TCPNewline,
		Log:          log,
		Dropped:      m.AppDropped,
		Delivered:    func() { m.Forwarded(labels.DirectionUpstreamToApp, string(ListenerTCP), 1) },
		Account:      acct,
	}
}
