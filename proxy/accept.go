package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/wsconn"
	"github.com/tetherproxy/tether/upstream"
)

// maxHandshakeBytes bounds an app's handshake request: gobwas reads headers of
// any size otherwise. A larger request is answered 431.
const maxHandshakeBytes = 16 << 10

// refusalLinger bounds how long a refused app's socket is drained before it is
// closed (see closeRefused).
const refusalLinger = 500 * time.Millisecond

// handleWebSocket serves one WebSocket app (ws or unix listener) from
// handshake to close.
func (s *Server) handleWebSocket(nc net.Conn, kind ListenerKind) {
	sess := s.newSession(kind)
	if ok, answered := sess.handshake(nc); !ok {
		if answered {
			closeRefused(nc)
		}
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
//
// The request must arrive whole within HandshakeTimeout, however slowly its
// bytes trickle in (slowloris), and within maxHandshakeBytes. Host and Origin
// are checked as their headers are read (browser.go), and with
// TETHER_FORWARD_PATH the request path is joined onto the upstream URL as
// the request line is read (forward.go), so a refused request never reaches
// the upstream. answered reports a refusal tether wrote.
func (sess *Session) handshake(nc net.Conn) (ok, answered bool) {
	s := sess.srv
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	refusal := "" // set when tether itself refuses, with the reason
	u := sess.upgrader(nc, &refusal)
	rw := struct {
		io.Reader
		io.Writer
	}{&handshakeReader{r: nc, left: maxHandshakeBytes}, nc}
	if _, err := u.Upgrade(rw); err != nil {
		return false, sess.refused(nc, err, refusal)
	}
	_ = nc.SetDeadline(time.Time{})
	sess.app = wsconn.New(nc, nil, wsconn.Options{
		MaxMessageBytes: s.opts.MaxMessageBytes,
		QueueBytes:      s.opts.DownstreamBufferBytes,
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
// its Reject* reason in *refusal.
//
// On a unix socket any Host is accepted: the Host check stops DNS
// rebinding, a browser reaching 127.0.0.1 under a foreign name, and no
// browser can open a unix socket (clients send "localhost", the socket path
// or anything else there). The Origin check stays: a reverse proxy in front
// of the socket may pass a web page's handshake through.
func (sess *Session) upgrader(nc net.Conn, refusal *string) ws.Upgrader {
	s := sess.srv
	return ws.Upgrader{
		OnRequest: func(uri []byte) error {
			err := sess.forwardPath(uri)
			if err != nil {
				*refusal = RejectPath
			}
			return err
		},
		OnHost: func(host []byte) error {
			if sess.kind == ListenerUnix {
				return nil
			}
			err := s.guard.checkHost(host, nc.LocalAddr())
			if err != nil {
				*refusal = RejectHost
			}
			return err
		},
		OnHeader: func(key, value []byte) error {
			if string(key) != "Origin" { // gobwas canonicalises header names
				return nil
			}
			err := s.guard.checkOrigin(value)
			if err != nil {
				*refusal = RejectOrigin
			}
			return err
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
			header, err := sess.dialFirst()
			if err != nil {
				*refusal = RejectUpstreamPermanent
			}
			return header, err
		},
	}
}

// refused cleans up after a handshake that failed, counts it and, for a
// request over maxHandshakeBytes (which gobwas drops without an answer),
// answers 431. It reports whether the app got an HTTP answer.
func (sess *Session) refused(nc net.Conn, err error, refusal string) (answered bool) {
	s := sess.srv
	tooLarge := errors.Is(err, errHeadersTooLarge)
	switch {
	case tooLarge:
		refusal = RejectHeadersTooLarge
		_, _ = io.WriteString(nc, headersTooLargeResponse)
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

// headersTooLargeResponse answers a request over maxHandshakeBytes.
var headersTooLargeResponse = "HTTP/1.1 431 Request Header Fields Too Large\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(headersTooLargeBody)) + "\r\n\r\n" + headersTooLargeBody

const headersTooLargeBody = "request headers exceed 16 KiB"

// handshakeReader reads an app's handshake request, failing with
// errHeadersTooLarge once maxHandshakeBytes have been read. (io.LimitReader's
// plain EOF could not be told from an app that hung up.)
type handshakeReader struct {
	r    io.Reader
	left int
}

func (h *handshakeReader) Read(p []byte) (int, error) {
	if h.left <= 0 {
		return 0, errHeadersTooLarge
	}
	if len(p) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= n
	return n, err
}

// closeRefused lets a refused app read tether's answer before the socket
// closes. Closing a socket whose receive buffer still holds request bytes
// (the headers after a refused Origin, say) makes the kernel send RST, and a
// client that gets the RST first may lose the answer (the lingering close of
// RFC 9112 §9.6): so half-close, then drain what the app still sends for at
// most refusalLinger.
func closeRefused(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(refusalLinger))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, maxHandshakeBytes))
}

// dialFirst starts the upstream client and waits up to AcceptWait for its first
// dial: connected → accept with the upstream's subprotocol; permanent failure →
// refuse with 502; anything else → accept, queue and keep dialling.
func (sess *Session) dialFirst() (ws.HandshakeHeader, error) {
	r, answered := sess.firstDial()
	switch {
	case answered && r.Err == nil:
		sess.setAppProtocol(r.Protocol)
		return protocolHeader(r.Protocol), nil
	case answered && r.Permanent:
		return nil, ws.RejectConnectionError(ws.RejectionStatus(http.StatusBadGateway),
			ws.RejectionReason(oneLine(fmt.Sprintf("upstream refused the connection: %v", r.Err))))
	}
	return sess.pinProtocol(), nil
}

// firstDial starts the upstream client and waits up to AcceptWait for the
// result of its first dial; answered is false when the wait ran out.
func (sess *Session) firstDial() (r upstream.DialResult, answered bool) {
	sess.startClient()
	t := time.NewTimer(sess.srv.opts.AcceptWait)
	defer t.Stop()
	select {
	case r = <-sess.client.First():
		return r, true
	case <-t.C:
		return upstream.DialResult{}, false
	}
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
