package proxydial

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error is a failure of the HTTP proxy between tether and the upstream:
// it could not be reached, it did not answer, or it refused the tunnel. Its
// text names the proxy by host:port only, never by its credentials.
type Error struct {
	Addr string // the proxy's host:port
	// Status is the proxy's HTTP answer to the CONNECT (or, for an http://
	// upstream, to the request); 0 when it gave none.
	Status int
	Reason string // the status text, informational
	// Authorized tells whether credentials were sent: a 407 then means
	// they are wrong, otherwise that the proxy wants some.
	Authorized bool
	Err        error // the socket error, when Status is 0
}

// Error reads "proxy rejected credentials (HTTP 407)", "proxy 10.0.0.1:3128
// answered HTTP 403 "Forbidden"" or "proxy 10.0.0.1:3128: connect:
// connection refused".
func (e *Error) Error() string {
	switch {
	case e.RejectsCredentials() && e.Authorized:
		return fmt.Sprintf("proxy rejected credentials (HTTP %d)", e.Status)
	case e.RejectsCredentials():
		return fmt.Sprintf("proxy requires credentials (HTTP %d): none are set; put them in the proxy URL, http://user:password@host:port", e.Status)
	case e.Status != 0 && e.Reason != "":
		return fmt.Sprintf("proxy %s answered HTTP %d %q", e.Addr, e.Status, e.Reason)
	case e.Status != 0:
		return fmt.Sprintf("proxy %s answered HTTP %d", e.Addr, e.Status)
	case e.Addr == "":
		return "proxy: " + e.Err.Error()
	}
	return "proxy " + e.Addr + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// RejectsCredentials reports a refusal of the proxy credentials, to which
// the credentials policy applies as to an upstream's 401: a 407 (RFC 9110
// §15.5.8), or a 401 answering a CONNECT, which only the proxy can have
// sent (tinyproxy 1.11 answers wrong credentials so).
func (e *Error) RejectsCredentials() bool {
	return e.Status == http.StatusProxyAuthRequired || e.Status == http.StatusUnauthorized
}

// Addr is the proxy's host:port, with the port its scheme implies.
func Addr(proxy *url.URL) string {
	if proxy.Port() != "" {
		return proxy.Host
	}
	port := "80"
	if proxy.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(proxy.Hostname(), port)
}

// authorization is the Proxy-Authorization value of the proxy URL's
// userinfo (RFC 9110 §11.7.1, Basic as RFC 7617 defines it), "" without.
func authorization(proxy *url.URL) string {
	if proxy.User == nil {
		return ""
	}
	password, _ := proxy.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(proxy.User.Username()+":"+password))
}

// Tunnel returns gobwas' NetDial for a WebSocket upstream behind
// proxy: it connects to the proxy (its name resolved by resolver, nil for
// Go's) (over TLS for an https:// proxy, verified
// with upstreamTLS like net/http does) and asks it with CONNECT (RFC 9110
// §9.3.6) for a tunnel to the upstream, for ws:// too: a plain-HTTP proxy
// would not pass an Upgrade through. The handshake, and TLS for wss://, then
// run inside the tunnel.
func Tunnel(proxy *url.URL, upstreamTLS *tls.Config, resolver *net.Resolver) func(ctx context.Context, network, addr string) (net.Conn, error) {
	paddr := Addr(proxy)
	auth := authorization(proxy)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Resolver: resolver} // the proxy's name; the proxy resolves the upstream's
		conn, err := d.DialContext(ctx, network, paddr)
		if err != nil {
			return nil, &Error{Addr: paddr, Err: unwrapOpError(err)}
		}
		if proxy.Scheme == "https" {
			conn = tls.Client(conn, tlsConfig(upstreamTLS, proxy.Hostname()))
		}
		tunnel, err := connect(ctx, conn, addr, auth)
		if err == nil {
			return tunnel, nil
		}
		_ = conn.Close()
		var pe *Error
		if errors.As(err, &pe) {
			pe.Addr = paddr
			return nil, err
		}
		return nil, &Error{Addr: paddr, Err: err}
	}
}

// tlsConfig is the TLS configuration for an https:// proxy: the
// upstream's (its roots and client certificate), naming the proxy.
func tlsConfig(base *tls.Config, host string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	cfg.ServerName = host
	cfg.NextProtos = nil // the tunnel speaks HTTP/1.1 CONNECT
	return cfg
}

// connect asks the proxy on conn for a tunnel to addr and returns the
// tunnel. ctx bounds the exchange: its deadline is the socket's, and its
// end interrupts a proxy that does not answer.
func connect(ctx context.Context, conn net.Conn, addr, auth string) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: addr},
		Host:   addr,
		Header: http.Header{},
	}
	if auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	if err := req.Write(conn); err != nil {
		return nil, ctxErr(ctx, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("reading the CONNECT answer: %w", err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &Error{
			Status:     resp.StatusCode,
			Reason:     strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))),
			Authorized: auth != "",
		}
	}
	if !stop() {
		// ctx ended as the answer came: the deadline is already poisoned.
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// Bytes past the answer are the upstream's: keep them first.
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// ctxErr prefers the context's error to the socket error it caused: a
// timeout of the socket, whose deadline is the context's, may come a moment
// before the context notices.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	var ne net.Error
	if _, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// unwrapOpError keeps a dial error's cause and operation but not the
// *net.OpError's addresses, which Error names itself.
func unwrapOpError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Errorf("%s: %w", oe.Op, oe.Err)
	}
	return err
}

// bufferedConn is a tunnel whose first bytes were read with the proxy's
// answer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// OnConnect types net/http's CONNECT refusals, which it would
// otherwise report as a bare status text.
func OnConnect(_ context.Context, proxy *url.URL, req *http.Request, resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	return &Error{
		Addr:       Addr(proxy),
		Status:     resp.StatusCode,
		Reason:     strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))),
		Authorized: req.Header.Get("Proxy-Authorization") != "",
	}
}

// DialError types net/http's failure to reach the proxy, a
// *net.OpError with Op "proxyconnect".
func DialError(err error, proxy *url.URL) error {
	var oe *net.OpError
	if proxy == nil || !errors.As(err, &oe) || oe.Op != "proxyconnect" {
		return err
	}
	return &Error{Addr: Addr(proxy), Err: unwrapOpError(oe.Err)}
}
