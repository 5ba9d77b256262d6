package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tetherproxy/tether/internal/proxydial"
)

// ProxyFunc chooses the HTTP proxy for a request to the upstream: it returns
// the proxy's URL, or nil for a direct connection. It has the signature of
// golang.org/x/net/http/httpproxy's Config.ProxyFunc, which is what
// net/http's ProxyFromEnvironment runs; a WebSocket URL is asked about as
// http:// (ws) or https:// (wss), the schemes those variables know.
type ProxyFunc func(*url.URL) (*url.URL, error)

// proxyFor returns the proxy for the upstream URL raw, nil for none.
// The WebSocket schemes are asked about as the HTTP ones they upgrade from.
func proxyFor(p ProxyFunc, raw string) (*url.URL, error) {
	if p == nil {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &badURLError{err: errors.New("cannot parse")}
	}
	q := *u
	switch q.Scheme {
	case "ws":
		q.Scheme = "http"
	case "wss":
		q.Scheme = "https"
	}
	proxy, err := p(&q)
	if err == nil && proxy != nil && proxy.Scheme != "http" && proxy.Scheme != "https" {
		err = fmt.Errorf("proxy scheme %q: only http:// and https:// proxies are supported", proxy.Scheme)
	}
	if err != nil {
		// The proxy variable's own URL is wrong; it may hold credentials,
		// which is why only the cause is kept.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &proxydial.Error{Err: fmt.Errorf("invalid proxy setting: %w", err)}
	}
	return proxy, nil
}

// httpProxy adapts p to http.Transport.Proxy.
func httpProxy(p ProxyFunc) func(*http.Request) (*url.URL, error) {
	if p == nil {
		return nil
	}
	return func(r *http.Request) (*url.URL, error) {
		proxy, err := proxyFor(p, r.URL.String())
		return proxy, err
	}
}
