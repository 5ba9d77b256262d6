package proxy

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// maxHandshakeBytes bounds an app's handshake request: gobwas reads headers of
// any size otherwise.
const maxHandshakeBytes = 16 << 10

// handle serves one accepted app connection from handshake to close.
func (s *Server) handle(nc net.Conn) {
	sess := s.newSession(nc)
	if !sess.handshake(nc) {
		_ = nc.Close()
		return
	}
	defer s.forget(sess)
	if s.isDraining() {
		// Shutdown may have passed over this session while its handshake
		// waited for the upstream (closeApp needs the app socket). Close it
		// now, or Shutdown would wait for its context to end.
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
	sess.serve()
}

// handshake answers the app's upgrade request. The upstream is dialled first,
// while the app waits (DESIGN.md "Sessions"): its subprotocol is the one the
// app gets, and a permanent upstream failure becomes an HTTP 502 the app can
// report, instead of a socket that opens and dies.
func (sess *Session) handshake(nc net.Conn) bool {
	s := sess.srv
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout + s.opts.AcceptWait))
	refusal := "" // set when tether itself refuses, with the reason
	u := ws.Upgrader{
		ProtocolCustom: func(v []byte) (string, bool) {
			// Collect every offered protocol; the upstream chooses (OnBeforeUpgrade).
			ok := httphead.ScanTokens(v, func(tok []byte) bool {
				sess.protocols = append(sess.protocols, string(tok))
				return true
			})
			return "", ok
		},
		OnBeforeUpgrade: func() (ws.HandshakeHeader, error) {
			if reason, err := s.admit(sess); err != nil {
				refusal = reason
				return nil, err
			}
			sess.admitted = true
			header, err := sess.dialFirst()
			if err != nil {
				refusal = RejectUpstreamPermanent
			}
			return header, err
		},
	}
	rw := struct {
		io.Reader
		io.Writer
	}{io.LimitReader(nc, maxHandshakeBytes), nc}
	_, err := u.Upgrade(rw)
	if err != nil {
		sess.log.Info("app handshake refused", zap.Error(err))
		s.opts.Metrics.HandshakeRejected(cmp.Or(refusal, handshakeFailure(err)))
		// Before client.Close: the upstream reader may be blocked in Message
		// waiting for an app socket that will never exist, and Close waits
		// for that reader. Also releases the context.
		sess.cancel()
		if sess.admitted {
			sess.client.Close()
			s.forget(sess)
		}
		return false
	}
	_ = nc.SetDeadline(time.Time{})
	sess.app = wsconn.New(nc, nil, wsconn.Options{
		MaxMessageBytes: s.opts.MaxMessageBytes,
		QueueBytes:      s.opts.DownstreamBufferBytes,
	})
	close(sess.appReady)
	sess.log.Info("app connected", zap.Stringer("remote", nc.RemoteAddr()),
		zap.Strings("protocols", sess.protocols))
	return true
}

// dialFirst starts the upstream client and waits up to AcceptWait for its first
// dial: connected → accept with the upstream's subprotocol; permanent failure →
// refuse with 502; anything else → accept, queue and keep dialling.
func (sess *Session) dialFirst() (ws.HandshakeHeader, error) {
	sess.startClient()
	t := time.NewTimer(sess.srv.opts.AcceptWait)
	defer t.Stop()
	select {
	case r := <-sess.client.First():
		switch {
		case r.Err == nil:
			sess.setAppProtocol(r.Protocol)
			return protocolHeader(r.Protocol), nil
		case r.Permanent:
			return nil, ws.RejectConnectionError(ws.RejectionStatus(http.StatusBadGateway),
				ws.RejectionReason(oneLine(fmt.Sprintf("upstream refused the connection: %v", r.Err))))
		}
	case <-t.C:
	}
	return sess.pinProtocol(), nil
}

// pinProtocol answers an app accepted before the upstream did. An app that
// offered subprotocols must get one back: RFC 6455 §4.1 lets a client fail the
// connection otherwise, and browsers and Node's ws do. It gets its first choice,
// and the upstream is from now on offered only that one, so both sides agree.
func (sess *Session) pinProtocol() ws.HandshakeHeader {
	if len(sess.protocols) == 0 {
		return nil
	}
	p := sess.protocols[0]
	sess.setAppProtocol(p)
	sess.client.PinProtocol(p)
	sess.log.Info("app accepted before the upstream answered; subprotocol pinned to the app's first choice",
		zap.String("protocol", p))
	return protocolHeader(p)
}

func protocolHeader(p string) ws.HandshakeHeader {
	if p == "" {
		return nil
	}
	return ws.HandshakeHeaderHTTP(http.Header{"Sec-Websocket-Protocol": {p}})
}

// oneLine keeps an error readable in a one-line HTTP body.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.TrimSpace(s)
}

// setAppProtocol records the subprotocol the app was accepted with.
func (sess *Session) setAppProtocol(p string) {
	sess.mu.Lock()
	sess.appProtocol, sess.protocolKnown = p, true
	sess.mu.Unlock()
}

// checkProtocol warns when an upstream connection speaks another subprotocol
// than the one the app was given (a dial that was already in flight when the
// protocol was pinned, or an upstream that ignores the offer).
func (sess *Session) checkProtocol(c *upstream.Conn) {
	sess.mu.Lock()
	want, known := sess.appProtocol, sess.protocolKnown
	sess.mu.Unlock()
	if known && c.Protocol() != want {
		sess.log.Warn("upstream chose another subprotocol than the app was accepted with",
			zap.Uint64("gen", c.Gen()), zap.String("app_protocol", want), zap.String("upstream_protocol", c.Protocol()))
	}
}
