package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/proxydial"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// dial opens one connection of the configured Kind.
func (c *Client) dial(ctx context.Context, gen uint64) (*Conn, error) {
	if c.opts.Kind == KindSSE {
		return c.dialSSE(ctx, gen)
	}
	return c.dialWebSocket(ctx, gen)
}

// dialWebSocket opens one WebSocket connection: it re-reads the token file
// (Kubernetes rotates projected tokens under a running pod), connects
// directly or through a CONNECT tunnel of the HTTP proxy Options.Proxy
// names, performs the handshake within DialTimeout (the tunnel included) and
// wraps the socket, keeping frames the server pushed together with its 101
// answer.
func (c *Client) dialWebSocket(ctx context.Context, gen uint64) (*Conn, error) {
	header, proxy, err := c.dialSetup(KindWebSocket)
	if err != nil {
		return nil, err
	}
	var status *StatusError
	offered := c.offered()
	guard := &handshakeGuard{left: maxHandshakeAnswer}
	d := ws.Dialer{
		Timeout:   c.opts.DialTimeout,
		Protocols: offered,
		Header:    ws.HandshakeHeaderHTTP(header),
		TLSConfig: c.opts.TLSConfig,
		OnStatusError: func(code int, reason []byte, resp io.Reader) {
			status = statusError(code, reason, resp, time.Now())
		},
		WrapConn: func(nc net.Conn) net.Conn { guard.Conn = nc; return guard },
	}
	switch {
	case proxy != nil:
		d.NetDial = proxydial.Tunnel(proxy, c.opts.TLSConfig, c.opts.Resolver)
	case c.opts.Resolver != nil:
		d.NetDial = (&net.Dialer{Resolver: c.opts.Resolver}).DialContext
	}
	if c.opts.Compression == CompressionAuto {
		d.Extensions = []httphead.Option{deflateOffer}
	}
	_, br, hs, err := d.Dial(ctx, c.sess.URL) // the guard wrapping the socket
	switch {
	case err != nil && status != nil:
		return nil, status
	case errors.Is(err, ws.ErrHandshakeBadSubProtocol):
		return nil, &SubprotocolError{Unoffered: true, Offered: offered, Permanent: true}
	case err != nil && handshakeError(err) != nil:
		return nil, handshakeError(err)
	case err != nil && isTimeout(err):
		return nil, fmt.Errorf("dial upstream: connect and handshake not done within TETHER_DIAL_TIMEOUT (%v): %w", c.opts.DialTimeout, err)
	case err != nil:
		return nil, fmt.Errorf("dial upstream: %w", err)
	}
	nc := guard.Conn // the handshake is done: no bound, no indirection
	if err := c.checkProtocol(offered, hs.Protocol); err != nil {
		// RFC 6455 §4.1 fails such a connection without a closing
		// handshake; nothing was read from it.
		_ = nc.Close()
		if br != nil {
			ws.PutReader(br)
		}
		return nil, err
	}
	deflate, err := negotiatedDeflate(hs)
	if err != nil {
		_ = nc.Close()
		if br != nil {
			ws.PutReader(br)
		}
		return nil, err
	}
	wc := wsconn.New(nc, br, wsconn.Options{
		Client:          true,
		MaxMessageBytes: c.opts.MaxMessageBytes,
		QueueBytes:      c.opts.QueueBytes,
		Deflate:         deflate,
		Account:         c.sess.Account,
	})
	if br != nil {
		ws.PutReader(br) // wsconn.New has taken its buffered bytes
	}
	return &Conn{gen: gen, protocol: hs.Protocol, remote: nc.RemoteAddr().String(), compressed: deflate != nil, ws: wc}, nil
}

// badURLError is a URL that cannot be dialled. gobwas reports a wrong scheme
// with an untyped error, so the URL is checked here, where the failure can be
// typed as permanent: retrying the same URL cannot succeed.
type badURLError struct{ err error }

func (e *badURLError) Error() string { return "bad upstream URL: " + e.err.Error() }
func (e *badURLError) Unwrap() error { return e.err }

// schemes are the URL schemes each Kind dials.
var schemes = [...][2]string{KindWebSocket: {"ws", "wss"}, KindSSE: {"http", "https"}}

// checkURL applies the checks gobwas' Dial makes before connecting, with the
// schemes of kind.
func checkURL(raw string, kind Kind) error {
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		// *url.Error quotes the whole URL, credentials included: keep only
		// what is wrong with it, since this error is logged.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &badURLError{err: err}
	}
	if want := schemes[kind]; u.Scheme != want[0] && u.Scheme != want[1] {
		return &badURLError{err: fmt.Errorf("scheme %q: want %s or %s for a %s upstream", u.Scheme, want[0], want[1], kind)}
	}
	if u.Host == "" {
		return &badURLError{err: errors.New("no host")}
	}
	return nil
}

// dialSetup is what a dial of kind needs before it connects: the upstream
// URL checked for kind, the request's headers, and the HTTP proxy (nil for
// a direct connection).
func (c *Client) dialSetup(kind Kind) (http.Header, *url.URL, error) {
	if err := checkURL(c.sess.URL, kind); err != nil {
		return nil, nil, err
	}
	header, err := c.requestHeader()
	if err != nil {
		return nil, nil, err
	}
	proxy, err := proxyFor(c.opts.Proxy, c.sess.URL)
	if err != nil {
		return nil, nil, err
	}
	return header, proxy, nil
}

// requestHeader is the configured static headers plus the bearer token read
// now, or else the URL's userinfo as Basic auth (RFC 7617), for a WebSocket
// upstream as net/http does for an SSE one: gobwas' dialer would drop it.
// An Authorization header set otherwise wins, as in net/http.
func (c *Client) requestHeader() (http.Header, error) {
	h, err := c.tokenHeader()
	if err != nil {
		return nil, err
	}
	if h.Get("Authorization") != "" {
		return h, nil
	}
	if u, err := url.Parse(c.sess.URL); err == nil && u.User != nil {
		if h == nil {
			h = http.Header{}
		}
		password, _ := u.User.Password()
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+password)))
	}
	return h, nil
}

// tokenHeader is the configured static headers plus the bearer token read now.
func (c *Client) tokenHeader() (http.Header, error) {
	h := c.opts.Header.Clone()
	if c.opts.TokenFile == "" {
		return h, nil
	}
	b, err := os.ReadFile(c.opts.TokenFile)
	if err != nil {
		return nil, &tokenError{err: fmt.Errorf("read token file: %w", err)}
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return nil, &tokenError{err: fmt.Errorf("read token file %s: file is empty", c.opts.TokenFile)}
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+token)
	return h, nil
}

// statusError reads the status answer's headers for Retry-After. resp is only
// valid during gobwas' OnStatusError callback, so everything is copied out here.
func statusError(code int, reason []byte, resp io.Reader, now time.Time) *StatusError {
	e := &StatusError{Status: code, Reason: string(reason)}
	r, err := http.ReadResponse(bufio.NewReader(resp), nil)
	if err != nil {
		return e
	}
	if d, ok := ParseRetryAfter(r.Header.Get("Retry-After"), now); ok {
		e.RetryAfter = d
	}
	return e
}

// isPermanentDialError reports dial failures that retrying cannot fix: a TLS
// certificate that does not verify, a malformed URL, a permanent HTTP status,
// or an SSE upstream's refusal (204, not an event stream). Whatever went
// wrong with the HTTP proxy is not: proxies are restarted and reconfigured
// under their users (a 407 follows the credentials policy instead).
func isPermanentDialError(err error) bool {
	var proxy *proxydial.Error
	if errors.As(err, &proxy) {
		return false
	}
	var (
		badURL           *badURLError
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &badURL), errors.As(err, &unknownAuthority), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &verification):
		return true
	}
	var se *StatusError
	if errors.As(err, &se) {
		return ClassifyStatus(se.Status) == StatusPermanent
	}
	return errors.Is(err, ErrPermanent)
}
