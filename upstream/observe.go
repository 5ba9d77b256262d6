package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/proxydial"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// Observer is told about each dial, loss and confirmation of a Client, for
// metrics. Its methods are called from the Client's goroutine, in order, so they
// must be quick and must not block; one Observer may serve many Clients at once.
//
// The string arguments come from small fixed sets, so they can be used as
// metric label values as they are:
//
//   - Dialed result: "ok"; "refused" (connection refused), "timeout" (connect,
//     TLS or handshake took longer than DialTimeout), "dns" (name resolution
//     failed), "tls" (TLS handshake or certificate verification failed),
//     "network" (any other socket error, the connection reset during the
//     handshake included), "http_401", "http_403", "http_429", "http_5xx",
//     "http_4xx" (any other 4xx), "http_other" (1xx-3xx other than 101; for
//     an SSE upstream also 204 and a 200 that is not an event stream),
//     "bad_url", "token" (the token file could not be read), "subprotocol"
//     (the upstream accepted with another subprotocol than the app's),
//     "handshake" (an answer that is no WebSocket handshake: a 101 without a
//     valid Sec-WebSocket-Accept, headers without end), "proxy" (the HTTP proxy
//     could not be reached or refused the tunnel), "proxy_auth" (the HTTP
//     proxy refused or wanted credentials: 407).
//   - Lost reason: "close" (the upstream sent a close frame; code is its
//     code, 1005 when the frame had none, and 1009 for an upstream message
//     or SSE event over MaxMessageBytes), "reset" (TCP reset), "eof" (TCP
//     closed without a close frame; for SSE, the response body ended,
//     cleanly or not), "heartbeat" (no frame, for SSE no byte, within
//     PingInterval+PingTimeout), "protocol" (the upstream broke RFC 6455),
//     "restore" (Handler.Restore failed), "network" (any other socket
//     error). code is 0 unless reason is "close".
type Observer interface {
	// Dialed reports the outcome of one dial attempt. Dials cut short by
	// Close are not reported.
	Dialed(result string)
	// Lost reports the end of an open connection, before the policy decides
	// whether to reconnect. A connection ended by Close is not reported.
	Lost(reason string, code int)
	// Confirmed reports the confirmation of a connection that follows the
	// loss of a confirmed one: downtime runs from that loss to now. The first
	// confirmation of a Client has no loss before it and is not reported.
	Confirmed(downtime time.Duration)
}

// nopObserver is the Observer of a Client whose Options have none.
type nopObserver struct{}

func (nopObserver) Dialed(string)           {}
func (nopObserver) Lost(string, int)        {}
func (nopObserver) Confirmed(time.Duration) {}

// dialResult names the outcome of a dial for Observer.Dialed.
func dialResult(err error) string {
	var (
		se      *StatusError
		refusal *streamRefusal
		badURL  *badURLError
		token   *tokenError
		dnsErr  *net.DNSError
		subErr  *SubprotocolError
		hsErr   *HandshakeError
		proxy   *proxydial.Error
	)
	switch {
	case err == nil:
		return labels.DialOK
	case errors.As(err, &proxy) && proxy.RejectsCredentials():
		return labels.DialProxyAuth
	case errors.As(err, &proxy):
		return labels.DialProxy
	case errors.As(err, &subErr):
		return labels.DialSubprotocol
	case errors.As(err, &hsErr):
		return labels.DialHandshake
	case errors.As(err, &se):
		return statusResult(se.Status)
	case errors.As(err, &refusal):
		return statusResult(refusal.status)
	case errors.As(err, &badURL):
		return labels.DialBadURL
	case errors.As(err, &token):
		return labels.DialToken
	case errors.As(err, &dnsErr):
		return labels.DialDNS
	case isTLSError(err):
		return labels.DialTLS
	case isTimeout(err):
		return labels.DialTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return labels.DialRefused
	}
	return labels.DialNetwork
}

// statusResult keeps the statuses an operator acts on apart (credentials,
// rate limiting) and folds the rest into classes, so the label stays bounded.
func statusResult(status int) string {
	switch {
	case status == 401:
		return labels.DialHTTP401
	case status == 403:
		return labels.DialHTTP403
	case status == 429:
		return labels.DialHTTP429
	case status >= 500 && status <= 599:
		return labels.DialHTTP5xx
	case status >= 400 && status <= 499:
		return labels.DialHTTP4xx
	}
	return labels.DialHTTPOther
}

func isTLSError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		alert            tls.AlertError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verification) ||
		errors.As(err, &record) || errors.As(err, &alert)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// lossReason names why an open connection ended for Observer.Lost, with the
// close code when the upstream sent one.
func lossReason(err error) (string, int) {
	var (
		ce      *CloseError
		pe      *wsconn.ProtocolError
		broken  *BrokenCloseError
		restore *restoreError
	)
	switch {
	case errors.As(err, &ce):
		return labels.LossClose, ce.Code
	case errors.As(err, &broken):
		return labels.LossProtocol, 0
	case errors.Is(err, ErrHeartbeatTimeout):
		return labels.LossHeartbeat, 0
	case errors.As(err, &restore):
		return labels.LossRestore, 0
	case errors.As(err, &pe):
		return labels.LossProtocol, 0
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return labels.LossReset, 0
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return labels.LossEOF, 0
	}
	return labels.LossNetwork, 0
}

// restoreError is a failed Handler.Restore, typed so that a loss can be
// told apart from the socket errors Restore may wrap.
type restoreError struct{ err error }

func (e *restoreError) Error() string { return "restore: " + e.err.Error() }
func (e *restoreError) Unwrap() error { return e.err }

// tokenError is a token file that could not be used; the dial never reached
// the network.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }
