package gapfill

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxBytes = 16 << 20
	DefaultTimeout  = 10 * time.Second
)

// discardLimit is how much of an error answer's body is read and thrown
// away, so the connection can be reused; a larger body closes it instead.
const discardLimit = 4 << 10

// Options configures a Client. Header, TokenFile and TLS are the upstream's
// (TETHER_UPSTREAM_HEADERS, TETHER_UPSTREAM_TOKEN_FILE, the CA and client
// certificate files), so the catch-up endpoint sees the same credentials as
// the WebSocket.
type Options struct {
	Header    http.Header // static request headers; Authorization is replaced when TokenFile is set
	TokenFile string      // bearer token, re-read on every request; "" for none
	TLS       *tls.Config // nil: system roots
	// Proxy chooses the HTTP proxy of each request, as for the upstream
	// (TETHER_UPSTREAM_PROXY, HTTPS_PROXY); nil connects directly.
	Proxy    func(*url.URL) (*url.URL, error)
	MaxBytes int64 // largest answer body; 0: DefaultMaxBytes
	// Timeout bounds one request, from dialing to the last byte of the
	// body; 0: DefaultTimeout. FetchRetry's context bounds all attempts.
	Timeout time.Duration

	now func() time.Time // the clock Retry-After dates are read against; tests
}

// Client fetches gap fills. Create it with NewClient and Close it when
// done; it is safe for concurrent use.
type Client struct {
	opts      Options
	transport *http.Transport
	http      *http.Client
}

// NewClient returns a Client for opts. It panics on a negative MaxBytes or
// Timeout, which configuration validation rejects first.
func NewClient(opts Options) *Client {
	if opts.MaxBytes < 0 || opts.Timeout < 0 {
		panic(fmt.Sprintf("gapfill: negative MaxBytes %d or Timeout %s", opts.MaxBytes, opts.Timeout))
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	// Each request's context carries Options.Timeout, which bounds the
	// dial, the TLS handshake, the headers and the body alike, so the
	// transport's own per-phase timeouts are left unset.
	tr := &http.Transport{
		// The upstream's proxy, never net/http's own reading of the
		// environment: the catch-up endpoint is reached as the upstream is.
		Proxy:                  requestProxy(opts.Proxy),
		OnProxyConnectResponse: proxyRefusal,
		DialContext:            (&net.Dialer{}).DialContext,
		TLSClientConfig:        opts.TLS.Clone(),
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
	}
	return &Client{opts: opts, transport: tr, http: &http.Client{Transport: tr}}
}

// requestProxy adapts p to http.Transport.Proxy.
func requestProxy(p func(*url.URL) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	if p == nil {
		return nil
	}
	return func(r *http.Request) (*url.URL, error) { return p(r.URL) }
}

// proxyRefusal types the proxy's refusal of a CONNECT, which net/http
// would report as a bare status text.
func proxyRefusal(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	return &StatusError{Status: resp.StatusCode, Proxy: true}
}

// Close closes the connections kept for reuse. Requests in flight are not
// interrupted (cancel their contexts); the Client stays usable.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
}

// Fetch GETs rawURL (a rendered TETHER_GAPFILL_URL) once and returns the
// messages of the answer, in order. Errors are a [*StatusError], a
// [*TooLargeError], a [*ParseError], or a network, token-file or timeout
// error; none of them quotes the URL.
func (c *Client) Fetch(parent context.Context, rawURL string) ([][]byte, error) {
	body, contentType, err := c.get(parent, rawURL)
	if err != nil {
		return nil, err
	}
	return Parse(body, contentType)
}

// FetchDocument GETs rawURL (a rendered TETHER_RESYNC_URL) once and returns
// its answer as one message: a single JSON value in valid UTF-8 (a
// snapshot), trimmed of surrounding blanks. The limits, credentials and
// errors are Fetch's; a body that is not one JSON value is a
// [*ParseError] with Document set.
func (c *Client) FetchDocument(parent context.Context, rawURL string) ([]byte, error) {
	body, _, err := c.get(parent, rawURL)
	if err != nil {
		return nil, err
	}
	return ParseDocument(body)
}

// get makes one bounded GET and returns the body of a 2xx answer and its
// Content-Type.
func (c *Client) get(parent context.Context, rawURL string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(parent, c.opts.Timeout)
	defer cancel()
	req, err := c.newRequest(ctx, rawURL)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, "", c.requestError(parent, ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Draining a small body lets the connection be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, discardLimit)
		se := c.statusError(resp)
		se.Proxy = resp.StatusCode == http.StatusProxyAuthRequired
		return nil, "", se
	}
	body, err := c.readBody(resp)
	if err != nil {
		return nil, "", c.requestError(parent, ctx, err)
	}
	return body, resp.Header.Get("Content-Type"), nil
}

func (c *Client) newRequest(ctx context.Context, rawURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &badURLError{err: unwrapURLError(err)}
	}
	header, err := c.header()
	if err != nil {
		return nil, err
	}
	req.Header = header
	return req, nil
}

// header is the static headers plus the bearer token read now: a
// Kubernetes projected token rotates under a running tether.
func (c *Client) header() (http.Header, error) {
	h := c.opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if h.Get("Accept") == "" {
		h.Set("Accept", "application/json, application/x-ndjson")
	}
	if c.opts.TokenFile == "" {
		return h, nil
	}
	b, err := os.ReadFile(c.opts.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("gapfill: read token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return nil, fmt.Errorf("gapfill: read token file %s: %w", c.opts.TokenFile, ErrEmptyToken)
	}
	h.Set("Authorization", "Bearer "+token)
	return h, nil
}

// readBody reads at most MaxBytes; the declared length is checked first so
// an honest server's oversized answer is refused before it is read.
func (c *Client) readBody(resp *http.Response) ([]byte, error) {
	limit := c.opts.MaxBytes
	if resp.ContentLength > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return body, nil
}

func (c *Client) statusError(resp *http.Response) *StatusError {
	e := &StatusError{Status: resp.StatusCode}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), c.opts.now()); ok {
		e.RetryAfter = d
	}
	return e
}

// requestError words a failed request. When the attempt's own deadline
// ended it, not the caller's context, the error says which limit was hit.
func (c *Client) requestError(parent, attempt context.Context, err error) error {
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		return err
	}
	err = unwrapURLError(err)
	if parent.Err() == nil && attempt.Err() != nil {
		return fmt.Errorf("%w: no complete answer within %s: %w", errAttemptTimeout, c.opts.Timeout, err)
	}
	return fmt.Errorf("gapfill: GET: %w", err)
}

// unwrapURLError drops the *url.Error layer, whose text quotes the URL and
// with it any token in the query.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
