package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/handshake"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// handleWebSocket answers one WebSocket app's handshake (ws or unix
// listener) and, once it is upgraded, starts the goroutine that serves it
// until it closes.
//
// That goroutine, the session's reader, is a new one rather than the one
// that answered the handshake: the reader parks in the app socket's read for
// the session's whole life, and a goroutine's stack never shrinks back to
// its first 2 KiB once it grew, as the handshake's does (gobwas' upgrade,
// the wait for the first dial, a log line), so every idle session would
// hold the handshake's stack.
func (s *Server) handleWebSocket(nc net.Conn, kind ListenerKind) {
	sess := s.newSession(kind)
	if ok, answered := (&wsHandshake{sess: sess, nc: nc}).run(); !ok {
		if answered {
			handshake.CloseRefused(nc)
		}
		_ = nc.Close()
		return
	}
	s.wg.Add(1) // while this handler is counted, so before Shutdown's Wait can return
	go s.serveWebSocket(sess)
}

// serveWebSocket runs an upgraded WebSocket app's session to its end.
func (s *Server) serveWebSocket(sess *Session) {
	defer s.wg.Done()
	defer s.forget(sess)
	if s.isDraining() {
		// Shutdown may have passed over this session while its handshake
		// waited for the upstream (closeApp needs the app socket). Close it
		// now, or Shutdown would wait for its context to end.
		sess.closeApp(ws.StatusGoingAway, "tether shutting down")
	}
	sess.serve()
}

// wsHandshake is one WebSocket app's upgrade request on its way to an
// answer: the session it is for, the app's socket, and the Reject* reason
// of a refusal tether itself made (set by the callbacks of upgrader). Only
// the connection's handler uses it.
type wsHandshake struct {
	sess    *Session
	nc      net.Conn
	refusal string
}

// run answers the app's upgrade request. The upstream is dialled first,
// while the app waits (docs/design.md "Sessions"): its subprotocol is the one the
// app gets, and a permanent upstream failure becomes an HTTP 502 the app can
// report, instead of a socket that opens and dies.
//
// The request must arrive whole within HandshakeTimeout, however slowly its
// bytes trickle in (slowloris), and within handshake.MaxRequestBytes. Host and Origin
// are checked as their headers are read (internal/browser), and with
// TETHER_FORWARD_PATH the request path is joined onto the upstream URL as
// the request line is read (forward.go), so a refused request never reaches
// the upstream. answered reports a refusal tether wrote.
func (h *wsHandshake) run() (ok, answered bool) {
	sess, s, nc := h.sess, h.sess.srv, h.nc
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	u := h.upgrader()
	rw := struct {
		io.Reader
		io.Writer
	}{handshake.NewReader(nc), nc}
	if _, err := u.Upgrade(rw); err != nil {
		return false, h.refused(err)
	}
	_ = nc.SetDeadline(time.Time{})
	sess.app = wsconn.New(nc, nil, wsconn.Options{
		MaxMessageBytes: s.opts.MaxMessageBytes,
		QueueBytes:      s.opts.DownstreamBufferBytes,
		Account:         sess.acct,
	})
	close(sess.appReady)
	fields := []zap.Field{zap.String("remote", remoteAddr(nc)), zap.Strings("protocols", sess.protocols)}
	if sess.upstreamURL != "" {
		// The path only: a query may carry credentials.
		fields = append(fields, zap.String("upstream_path", upstreamPath(sess.upstreamURL)))
	}
	sess.log.Info("app connected", fields...)
	return true, false
}

// upgrader returns the gobwas callbacks of one handshake, in the order gobwas
// calls them: the request path (TETHER_FORWARD_PATH), Host and Origin as
// their headers are read, the offered subprotocols, then, once the request
// is complete, admission and the first dial. A callback that refuses stores
// its Reject* reason in h.refusal.
//
// On a unix socket any Host is accepted: the Host check stops DNS
// rebinding, a browser reaching 127.0.0.1 under a foreign name, and no
// browser can open a unix socket (clients send "localhost", the socket path
// or anything else there). The Origin check stays: a reverse proxy in front
// of the socket may pass a web page's handshake through.
func (h *wsHandshake) upgrader() ws.Upgrader {
	sess, s, nc, refusal := h.sess, h.sess.srv, h.nc, &h.refusal
	return ws.Upgrader{
		OnRequest: func(uri []byte) error {
			u, err := s.forwardPath(uri)
			if err != nil {
				*refusal = labels.RejectPath
				return err
			}
			if u != "" {
				sess.upstreamURL = u
			}
			return nil
		},
		OnHost: func(host []byte) error {
			if sess.kind == ListenerUnix {
				return nil
			}
			err := s.guard.CheckHost(host, nc.LocalAddr())
			if err != nil {
				*refusal = labels.RejectHost
				return forbidden(err)
			}
			return nil
		},
		OnHeader: func(key, value []byte) error {
			if string(key) != "Origin" { // gobwas canonicalises header names
				return nil
			}
			err := s.guard.CheckOrigin(value)
			if err != nil {
				*refusal = labels.RejectOrigin
				return forbidden(err)
			}
			return nil
		},
		ProtocolCustom: func(v []byte) (string, bool) {
			// Collect every offered protocol; the upstream chooses (OnBeforeUpgrade).
			ok := httphead.ScanTokens(v, func(tok []byte) bool {
				sess.protocols = append(sess.protocols, string(tok))
				return true
			})
			return "", ok
		},
		OnBeforeUpgrade: func() (ws.HandshakeHeader, error) {
			// The request is in: the answer may now wait for the first dial.
			_ = nc.SetDeadline(time.Now().Add(s.opts.AcceptWait + s.opts.HandshakeTimeout))
			if reason, err := s.admit(sess); err != nil {
				*refusal = reason
				return nil, err
			}
			sess.admitted = true
			header, err := h.dialFirst()
			if err != nil {
				*refusal = labels.RejectUpstreamPermanent
				return nil, err
			}
			if s.isDraining() {
				// The drain started while the dial was awaited: an app
				// upgraded now would only be closed again (docs/design.md
				// "Sessions"), so it gets the answer of a drain.
				*refusal = labels.RejectDraining
				return nil, errDrainingRefusal
			}
			return header, nil
		},
	}
}

// refused cleans up after a handshake that failed, counts it and, for a
// request over handshake.MaxRequestBytes (which gobwas drops without an answer),
// answers 431. It reports whether the app got an HTTP answer.
func (h *wsHandshake) refused(err error) (answered bool) {
	sess, s, nc, refusal := h.sess, h.sess.srv, h.nc, h.refusal
	tooLarge := errors.Is(err, handshake.ErrTooLarge)
	switch {
	case tooLarge:
		refusal = labels.RejectHeadersTooLarge
		_, _ = io.WriteString(nc, handshake.TooLargeResponse)
	case refusal == "":
		refusal = handshakeFailure(err)
	}
	sess.log.Info("app handshake refused", zap.Error(err), zap.String("reason", refusal))
	s.opts.Metrics.HandshakeRejected(refusal)
	// Before client.Close: the upstream reader may be blocked in Message
	// waiting for an app socket that will never exist, and Close waits
	// for that reader. Also releases the context.
	sess.cancel()
	if sess.admitted {
		sess.client.Close()
		s.forget(sess)
	}
	var rejected *ws.ConnectionRejectedError
	return tooLarge || errors.As(err, &rejected)
}

// dialFirst starts the upstream client and waits up to AcceptWait for its first
// dial: connected → accept with the upstream's subprotocol; permanent failure →
// refuse with 502; anything else → accept, queue and keep dialling.
func (h *wsHandshake) dialFirst() (ws.HandshakeHeader, error) {
	sess := h.sess
	r, answered := sess.firstDial()
	switch {
	case answered && r.Err == nil:
		sess.subprotocol.set(r.Protocol)
		return protocolHeader(r.Protocol), nil
	case answered && r.Permanent:
		return nil, handshake.Refusal(http.StatusBadGateway, fmt.Sprintf("upstream refused the connection: %v", r.Err))
	}
	return h.pinProtocol(), nil
}

// firstDial starts the upstream client and waits up to AcceptWait for the
// result of its first dial; answered is false when the wait ran out or the
// drain started, which must not wait for a dial that may hang for
// DialTimeout: the caller sees the drain and closes (or refuses) the app.
func (sess *Session) firstDial() (r upstream.DialResult, answered bool) {
	sess.startClient()
	t := time.NewTimer(sess.srv.opts.AcceptWait)
	defer t.Stop()
	select {
	case r = <-sess.client.First():
		return r, true
	case <-t.C:
	case <-sess.srv.drainStarted:
	}
	return upstream.DialResult{}, false
}

// pinProtocol answers an app accepted before the upstream did. An app that
// offered subprotocols must get one back: RFC 6455 §4.1 lets a client fail the
// connection otherwise, and browsers and Node's ws do. It gets its first choice,
// and the upstream is from now on offered only that one, so both sides agree.
func (h *wsHandshake) pinProtocol() ws.HandshakeHeader {
	sess := h.sess
	if len(sess.protocols) == 0 {
		return nil
	}
	p := sess.protocols[0]
	sess.subprotocol.set(p)
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

// forbidden is the 403 refusal of a handshake internal/browser turned away:
// the request is understood and refused, and 421 (Misdirected Request)
// would invite clients to retry it on another connection (RFC 9110
// §15.5.20), which cannot help.
func forbidden(err error) error {
	return handshake.Refusal(http.StatusForbidden, err.Error())
}
