package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/tetherproxy/tether/upstream"
)

// proxySetting is TETHER_UPSTREAM_PROXY: unset (the environment's
// HTTPS_PROXY, HTTP_PROXY and NO_PROXY decide), off, or one proxy URL for
// every upstream request.
type proxySetting struct {
	mode proxyMode
	url  *url.URL // proxyFixed
	// env is HTTPS_PROXY, HTTP_PROXY and NO_PROXY, which Load reads
	// from the same environment, whatever the mode.
	env httpproxy.Config
}

type proxyMode int

const (
	proxyFromEnvironment proxyMode = iota
	proxyOff
	proxyFixed
)

// UnmarshalText accepts "", off, or an http:// or https:// URL with a host.
// Errors never quote the value: it may hold the proxy's password.
func (p *proxySetting) UnmarshalText(text []byte) error {
	v := strings.TrimSpace(string(text))
	switch {
	case v == "":
		p.mode, p.url = proxyFromEnvironment, nil
		return nil
	case strings.EqualFold(v, "off"):
		p.mode, p.url = proxyOff, nil
		return nil
	}
	u, err := parseProxyURL(v)
	if err != nil {
		return err
	}
	p.mode, p.url = proxyFixed, u
	return nil
}

// parseProxyURL checks a TETHER_UPSTREAM_PROXY URL.
func parseProxyURL(v string) (*url.URL, error) {
	if !strings.Contains(v, "://") {
		return nil, errors.New("no scheme: write the proxy as a URL, http://host:port (or https://, or off)")
	}
	u, err := url.Parse(v)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("invalid URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q: want http or https (the proxy's own, whatever the upstream's)", u.Scheme)
	case u.Hostname() == "":
		return nil, errors.New("no host: write http://host:port")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return nil, errors.New("a proxy URL is scheme, credentials, host and port only: no path, query or fragment")
	}
	return u, nil
}

// proxyEnvironment is what Go's net/http reads for its proxy
// (http.ProxyFromEnvironment): upper case first, then lower case.
func proxyEnvironment(environ map[string]string) httpproxy.Config {
	get := func(names ...string) string {
		for _, n := range names {
			if v := environ[n]; v != "" {
				return v
			}
		}
		return ""
	}
	return httpproxy.Config{
		HTTPProxy:  get("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: get("HTTPS_PROXY", "https_proxy"),
		NoProxy:    get("NO_PROXY", "no_proxy"),
		// net/http refuses HTTP_PROXY under CGI (httpoxy); tether is never
		// a CGI program, but keeps the rule rather than a variant of it.
		CGI: environ["REQUEST_METHOD"] != "",
	}
}

// ProxyFunc is the proxy choice of every upstream request: nil (direct)
// for off, the one URL of TETHER_UPSTREAM_PROXY for every request, loopback
// upstreams included; unset, net/http's reading of the environment, which
// never proxies loopback addresses and localhost, and nil when the
// environment names no proxy.
func (c Config) ProxyFunc() upstream.ProxyFunc {
	switch c.UpstreamProxy.mode {
	case proxyOff:
		return nil
	case proxyFixed:
		u := c.UpstreamProxy.url
		return func(*url.URL) (*url.URL, error) { return u, nil }
	}
	if c.UpstreamProxy.env.HTTPProxy == "" && c.UpstreamProxy.env.HTTPSProxy == "" {
		return nil
	}
	return c.UpstreamProxy.env.ProxyFunc()
}

// validateProxy refuses an environment proxy that tether cannot use,
// naming its variable, unless TETHER_UPSTREAM_PROXY overrides it (its own
// value was checked when it was parsed). net/http would ignore an
// unparsable value and connect directly, which behind a corporate proxy
// fails with nothing saying why.
func (c Config) validateProxy() error {
	if c.UpstreamProxy.mode != proxyFromEnvironment {
		return nil
	}
	return errors.Join(
		checkEnvProxy("HTTPS_PROXY", c.UpstreamProxy.env.HTTPSProxy),
		checkEnvProxy("HTTP_PROXY", c.UpstreamProxy.env.HTTPProxy),
	)
}

// checkEnvProxy reads an environment proxy as net/http does (a value
// without a scheme is http://) and refuses one that does not parse into a
// host, or whose scheme is not http or https: tether tunnels through HTTP
// proxies only.
func checkEnvProxy(name, v string) error {
	if v == "" {
		return nil
	}
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil || u.Hostname() == "" {
		return newProblem(name, "not a proxy URL (it does not parse into a host); fix it, or set TETHER_UPSTREAM_PROXY to a URL or off")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return newProblem(name, "scheme %q: tether uses HTTP proxies only (http:// or https://); set TETHER_UPSTREAM_PROXY to one, or off", u.Scheme)
	}
	return nil
}

// UpstreamProxyText says, for the start-up log, which proxy the upstream
// URL gets and why, credentials redacted.
func (c Config) UpstreamProxyText() string {
	p := c.ProxyFunc()
	if c.UpstreamURL == nil || p == nil {
		return "none"
	}
	target := *c.UpstreamURL
	switch target.Scheme {
	case "ws":
		target.Scheme = "http"
	case "wss":
		target.Scheme = "https"
	}
	u, err := p(&target)
	switch {
	case err != nil:
		return "invalid"
	case u == nil:
		return "none (NO_PROXY or a loopback upstream)"
	case c.UpstreamProxy.mode == proxyFixed:
		return redactURL(u) + " (TETHER_UPSTREAM_PROXY)"
	}
	return redactURL(u) + " (environment)"
}
