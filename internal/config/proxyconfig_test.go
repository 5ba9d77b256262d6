package config

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// proxyOf asks cfg's ProxyFunc about raw and returns the proxy's URL, ""
// for a direct connection.
func proxyOf(t *testing.T, env map[string]string, raw string) string {
	t.Helper()
	cfg, err := Load(env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p := cfg.ProxyFunc()
	if p == nil {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p(u)
	if err != nil {
		t.Fatalf("ProxyFunc(%s): %v", raw, err)
	}
	if got == nil {
		return ""
	}
	return got.String()
}

// TestProxyChoice: TETHER_UPSTREAM_PROXY overrides the environment and
// applies to loopback upstreams too; off is direct whatever the
// environment says; unset, HTTPS_PROXY, HTTP_PROXY and NO_PROXY apply as
// in net/http, which never proxies a loopback address or localhost.
func TestProxyChoice(t *testing.T) {
	envProxy := map[string]string{
		"HTTPS_PROXY": "http://corp-proxy:3128",
		"http_proxy":  "http://plain-proxy:8080",
		"NO_PROXY":    ".internal.example,10.0.0.0/8",
	}
	with := func(extra map[string]string) map[string]string {
		m := configtest.WithURL(nil)
		for k, v := range envProxy {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name, target, want string
		extra              map[string]string
	}{
		{"https from HTTPS_PROXY", "https://feed.example.com/v1", "http://corp-proxy:3128", nil},
		{"http from the lower-case http_proxy", "http://feed.example.com/v1", "http://plain-proxy:8080", nil},
		{"NO_PROXY domain", "https://feed.internal.example/v1", "", nil},
		{"NO_PROXY CIDR", "https://10.1.2.3/v1", "", nil},
		{"loopback is direct from the environment", "https://127.0.0.1:8443/", "", nil},
		{"localhost is direct from the environment", "https://localhost:8443/", "", nil},
		{"the override applies to loopback", "https://127.0.0.1:8443/", "http://u:p@127.0.0.1:3128",
			map[string]string{"TETHER_UPSTREAM_PROXY": "http://u:p@127.0.0.1:3128"}},
		{"the override ignores NO_PROXY", "https://feed.internal.example/v1", "https://proxy.corp:443",
			map[string]string{"TETHER_UPSTREAM_PROXY": "https://proxy.corp:443"}},
		{"off", "https://feed.example.com/v1", "", map[string]string{"TETHER_UPSTREAM_PROXY": "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proxyOf(t, with(tc.extra), tc.target); got != tc.want {
				t.Errorf("proxy for %s = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
	if got := proxyOf(t, configtest.WithURL(nil), "https://feed.example.com/v1"); got != "" {
		t.Errorf("no proxy variables: proxy %q, want direct", got)
	}
}

// TestProxyConfigErrors: a bad proxy URL is a configuration error naming
// its variable, without echoing the password.
func TestProxyConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"no scheme", "proxy.corp:3128", "TETHER_UPSTREAM_PROXY: no scheme: write the proxy as a URL, http://host:port (or https://, or off)"},
		{"no scheme with credentials", "alice:s3cret@proxy.corp:3128", "TETHER_UPSTREAM_PROXY: no scheme"},
		{"socks", "socks5://proxy.corp:1080", `TETHER_UPSTREAM_PROXY: scheme "socks5": want http or https`},
		{"no host", "http://:3128", "TETHER_UPSTREAM_PROXY: no host: write http://host:port"},
		{"a path", "http://proxy.corp:3128/pac", "TETHER_UPSTREAM_PROXY: a proxy URL is scheme, credentials, host and port only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_UPSTREAM_PROXY": tc.value}))
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
				t.Fatalf("errors %q, want one starting %q", lines, tc.want)
			}
			if strings.Contains(lines[0], "s3cret") {
				t.Errorf("error %q echoes the password", lines[0])
			}
		})
	}
	for name, value := range map[string]string{"HTTPS_PROXY": "http://bad host:3128", "http_proxy": "socks5://proxy.corp:1080"} {
		lines := loadErrLines(t, configtest.WithURL(map[string]string{name: value}))
		if want := strings.ToUpper(name) + ": "; len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
			t.Errorf("%s=%s: errors %q, want one naming %s", name, value, lines, strings.ToUpper(name))
		}
	}
	if _, err := Load(configtest.WithURL(map[string]string{"HTTPS_PROXY": "proxy.corp:3128"})); err != nil {
		t.Errorf("HTTPS_PROXY without a scheme, which net/http reads as http://: %v", err)
	}
	if _, err := Load(configtest.WithURL(map[string]string{"HTTPS_PROXY": "http://bad host:3128", "TETHER_UPSTREAM_PROXY": "off"})); err != nil {
		t.Errorf("TETHER_UPSTREAM_PROXY=off with a bad HTTPS_PROXY: %v, want no error (the override ignores it)", err)
	}
}
