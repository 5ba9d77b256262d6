package proxy

import (
	"fmt"
	"net"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// BinaryPolicy is what a tcp:// app gets for a binary upstream message
// (TETHER_TCP_BINARY). A line holds text, and raw bytes could hold a newline
// that would split one message into two lines, so a binary message is never
// written as is.
type BinaryPolicy int

const (
	// BinaryBase64 writes the message as one line of standard base64 (RFC
	// 4648 §4, padded). The default: nothing is lost, and an app that
	// expects binary messages can decode them.
	BinaryBase64 BinaryPolicy = iota
	// BinaryDrop does not deliver the message; each drop is counted
	// (tether_app_dropped_total{reason="binary"}) and logged.
	BinaryDrop
	// BinaryClose closes the app, as an app that cannot take binary data
	// would close a WebSocket with 1003.
	BinaryClose
)

var binaryPolicyNames = [...]string{"base64", "drop", "close"}

// String returns base64, drop or close.
func (p BinaryPolicy) String() string {
	if p < 0 || int(p) >= len(binaryPolicyNames) {
		return fmt.Sprintf("BinaryPolicy(%d)", int(p))
	}
	return binaryPolicyNames[p]
}

// ParseBinaryPolicy parses base64, drop or close.
func ParseBinaryPolicy(s string) (BinaryPolicy, error) {
	for p, name := range binaryPolicyNames {
		if s == name {
			return BinaryPolicy(p), nil
		}
	}
	return 0, fmt.Errorf("invalid binary policy %q: want base64, drop or close", s)
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a BinaryPolicy.
func (p *BinaryPolicy) UnmarshalText(b []byte) error {
	v, err := ParseBinaryPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// NewlinePolicy is what a tcp:// app gets for an upstream text message that
// contains a line break (CR or LF), which written as is would reach the app
// as several lines (TETHER_TCP_NEWLINE).
type NewlinePolicy int

const (
	// NewlineSpace replaces every CR and LF by a space and delivers the
	// message as one line. The default: JSON cannot hold a raw CR or LF
	// inside a string, only between tokens where any whitespace is
	// equivalent, so a JSON parser sees the same value. Other text is
	// altered.
	NewlineSpace NewlinePolicy = iota
	// NewlineDrop does not deliver the message; each drop is counted
	// (tether_app_dropped_total{reason="newline"}) and logged.
	NewlineDrop
	// NewlineClose closes the app.
	NewlineClose
)

var newlinePolicyNames = [...]string{"space", "drop", "close"}

// String returns space, drop or close.
func (p NewlinePolicy) String() string {
	if p < 0 || int(p) >= len(newlinePolicyNames) {
		return fmt.Sprintf("NewlinePolicy(%d)", int(p))
	}
	return newlinePolicyNames[p]
}

// ParseNewlinePolicy parses space, drop or close.
func ParseNewlinePolicy(s string) (NewlinePolicy, error) {
	for p, name := range newlinePolicyNames {
		if s == name {
			return NewlinePolicy(p), nil
		}
	}
	return 0, fmt.Errorf("invalid newline policy %q: want space, drop or close", s)
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a NewlinePolicy.
func (p *NewlinePolicy) UnmarshalText(b []byte) error {
	v, err := ParseNewlinePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

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
		sess.setAppProtocol(r.Protocol)
	case answered && r.Permanent:
		sess.refuseLines(RejectUpstreamPermanent, fmt.Errorf("upstream refused the connection: %w", r.Err))
		return false
	}
	sess.app = newLineConn(nc, sess.lineOptions())
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

// lineOptions configures a tcp:// app's socket from the server's options.
func (sess *Session) lineOptions() lineOptions {
	o := sess.srv.opts
	m := o.Metrics
	return lineOptions{
		MaxLineBytes: o.MaxMessageBytes,
		QueueBytes:   o.DownstreamBufferBytes,
		CloseWait:    wsconn.DefaultCloseWait, // as for a WebSocket app's closing handshake
		Binary:       o.TCPBinary,
		Newline:      o.TCPNewline,
		Log:          sess.log,
		Dropped:      m.AppDropped,
		Delivered:    func() { m.Message(DirectionUpstreamToApp, string(ListenerTCP)) },
	}
}
