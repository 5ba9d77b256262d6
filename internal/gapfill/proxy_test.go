package gapfill

import (
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/proxytest"
)

func portOf(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// TestFetchThroughProxy: catch-up requests go through the upstream's HTTP
// proxy, a real one (tinyproxy): an http:// URL as a proxied GET, an
// https:// one through a CONNECT tunnel, with the proxy credentials; the
// proxy's refusals are final and say that the proxy refused, a proxy that
// is down is transient.
func TestFetchThroughProxy(t *testing.T) {
	feed := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"seq":1},{"seq":2}]`))
	}
	plain := newServer(t, feed)
	secure := httptest.NewTLSServer(http.HandlerFunc(feed))
	t.Cleanup(secure.Close)
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	tlsConfig := secure.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConfig.RootCAs = roots

	proxy := proxytest.Start(t, proxytest.Options{User: "alice", Password: "s3cret",
		ConnectPorts: []int{portOf(t, plain.URL), portOf(t, secure.URL)}})
	via := func(u *url.URL) func(*url.URL) (*url.URL, error) {
		return func(*url.URL) (*url.URL, error) { return u, nil }
	}
	for _, tc := range []struct{ name, url, request string }{
		{"http", plain.URL + "/gap?from=1", "GET " + plain.URL + "/gap?from=1 "},
		{"https", secure.URL + "/gap?from=1", "CONNECT " + strings.TrimPrefix(secure.URL, "https://") + " "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Options{TLS: tlsConfig, Proxy: via(proxy.URL())})
			msgs, err := c.Fetch(testContext(t), tc.url)
			if err != nil || len(msgs) != 2 {
				t.Fatalf("Fetch = %q, %v; want two messages", msgs, err)
			}
			found := false
			for _, r := range proxy.Requests() {
				found = found || strings.HasPrefix(r, tc.request)
			}
			if !found {
				t.Errorf("the proxy logged no %q...; its requests: %q", tc.request, proxy.Requests())
			}
		})
	}
	for _, tc := range []struct {
		name, url string
		proxy     *url.URL
		status    int
	}{
		{"http without credentials", plain.URL + "/gap", proxy.URLWith("", ""), http.StatusProxyAuthRequired},
		{"https with wrong credentials", secure.URL + "/gap", proxy.URLWith("alice", "wrong"), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Options{TLS: tlsConfig, Proxy: via(tc.proxy)})
			_, err := c.Fetch(testContext(t), tc.url)
			var se *StatusError
			if !errors.As(err, &se) || !se.Proxy || se.Status != tc.status || Transient(err) {
				t.Fatalf("Fetch error %v, want the proxy's final %d", err, tc.status)
			}
			if !strings.Contains(err.Error(), "proxy answered HTTP") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("error %q, want it to name the proxy and not the password", err)
			}
		})
	}
	t.Run("proxy down", func(t *testing.T) {
		proxy.Stop()
		c := newClient(t, Options{Proxy: via(proxy.URL())})
		_, err := c.Fetch(testContext(t), plain.URL+"/gap")
		if err == nil || !Transient(err) {
			t.Fatalf("Fetch error %v, want a transient failure", err)
		}
	})
}
