package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tetherproxy/tether/internal/proxydial"
)

// eventStreamType is the media type of an event stream (HTML Living
// Standard §9.2.8).
const eventStreamType = "text/event-stream"

// maxContentTypeShown bounds the Content-Type quoted in an error: the error
// may end up as the reason of the app's close frame (123 bytes at most).
const maxContentTypeShown = 40

// newHTTPClient is the HTTP client of one Client with an SSE upstream. It
// has its own connection pool, so closing the Client frees its sockets
// (closeIdle), and its TLS settings are a copy: the HTTP/2 setup writes
// NextProtos into them, and Options.TLSConfig is shared by every session.
// Its proxy is Options.Proxy's choice, as for a WebSocket upstream; a
// refused CONNECT is typed as a *proxydial.Error.
func newHTTPClient(opts Options) *http.Client {
	d := &net.Dialer{Timeout: opts.DialTimeout, Resolver: opts.Resolver}
	t := &http.Transport{
		Proxy:                  httpProxy(opts.Proxy),
		OnProxyConnectResponse: proxydial.OnConnect,
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    opts.DialTimeout,
		ResponseHeaderTimeout:  opts.DialTimeout,
		ForceAttemptHTTP2:      true,
		// An event stream is incremental: a compressing server or proxy
		// tends to hold events back until its buffer fills, which would
		// look like silence to the heartbeat.
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
	}
	if opts.TLSConfig != nil {
		t.TLSClientConfig = opts.TLSConfig.Clone()
	}
	return &http.Client{Transport: t}
}

// closeIdle frees the sockets an SSE Client's HTTP client keeps for reuse.
func (c *Client) closeIdle() {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}

// dialSSE requests the event stream: the static headers, the bearer token
// read now, and Last-Event-ID when an earlier stream of this Client had one
// (HTML Living Standard §9.2.4, "reestablish the connection"). The whole
// request, up to the response headers, takes at most DialTimeout.
func (c *Client) dialSSE(ctx context.Context, gen uint64) (*Conn, error) {
	header, proxy, err := c.dialSetup(KindSSE)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.sess.URL, nil)
	if err != nil {
		cancel()
		return nil, &badURLError{err: errors.New("cannot build the request")}
	}
	req.Header = streamHeader(header, c.lastEventID)
	resp, err := c.doWithin(req, cancel)
	if err != nil {
		cancel()
		return nil, proxydial.DialError(err, proxy)
	}
	if err := checkStream(resp, proxy, time.Now()); err != nil {
		_ = resp.Body.Close()
		cancel()
		return nil, err
	}
	return &Conn{gen: gen, ws: newSSEConn(resp.Body, cancel, c.opts, c.sess.Account, c.lastEventID)}, nil
}

// streamHeader is an event stream request's header: what EventSource sends
// (Accept, Cache-Control: no-cache so no cache answers with a stale stream),
// unless the configured headers say otherwise, and the resume point.
func streamHeader(h http.Header, lastEventID string) http.Header {
	if h == nil {
		h = http.Header{}
	}
	if h.Get("Accept") == "" {
		h.Set("Accept", eventStreamType)
	}
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache")
	}
	if lastEventID != "" {
		h.Set("Last-Event-ID", lastEventID)
	}
	return h
}

// doWithin sends req and waits for the response headers at most
// DialTimeout, like a WebSocket handshake. The limit is a timer rather than
// a context deadline because the request's context also governs the body,
// which must outlive it.
func (c *Client) doWithin(req *http.Request, cancel context.CancelFunc) (*http.Response, error) {
	if c.opts.DialTimeout <= 0 {
		return c.do(req)
	}
	t := time.AfterFunc(c.opts.DialTimeout, cancel)
	resp, err := c.do(req)
	if !t.Stop() {
		// The timer fired: the request is cancelled, whatever Do answered.
		if err == nil {
			_ = resp.Body.Close()
		}
		return nil, fmt.Errorf("dial upstream: no response within %v: %w", c.opts.DialTimeout, context.DeadlineExceeded)
	}
	return resp, err
}

// do sends req. A *url.Error quotes the whole URL, credentials included:
// only its cause is kept, since this error is logged.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("dial upstream: %w", err)
	}
	return resp, nil
}

// checkStream applies the status policy to an event stream's response:
// 200 with an event stream opens it; 204 is the server's "stop"; a 200 with
// another body is permanent; a 407 through proxy is the proxy's refusal of
// its credentials; every other status goes through the same StatusError
// policy as a refused WebSocket handshake (ClassifyStatus, Retry-After).
func checkStream(resp *http.Response, proxy *url.URL, now time.Time) error {
	switch {
	case resp.StatusCode == http.StatusOK:
		return checkContentType(resp.Header.Get("Content-Type"))
	case resp.StatusCode == http.StatusNoContent:
		return &streamRefusal{status: http.StatusNoContent}
	case resp.StatusCode == http.StatusProxyAuthRequired && proxy != nil:
		// An http:// upstream is requested from the proxy itself, which
		// answers for itself.
		return &proxydial.Error{Addr: proxydial.Addr(proxy), Status: resp.StatusCode, Authorized: proxy.User != nil}
	}
	e := &StatusError{
		Status: resp.StatusCode,
		Reason: strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))),
	}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		e.RetryAfter = d
	}
	return e
}

// checkContentType accepts text/event-stream, in any case, with any
// parameters (charset: the stream is UTF-8 whatever it says).
func checkContentType(ct string) error {
	mediaType, _, _ := strings.Cut(ct, ";")
	if strings.EqualFold(strings.TrimSpace(mediaType), eventStreamType) {
		return nil
	}
	shown := strings.TrimSpace(ct)
	if len(shown) > maxContentTypeShown {
		shown = shown[:maxContentTypeShown] + "…"
	}
	return &streamRefusal{status: http.StatusOK, contentType: shown}
}
