package browser

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Browser protection (docs/design.md "Local listener and security"). A socket on
// 127.0.0.1 is reachable from every page the user's browser opens, and a
// WebSocket is not bound by the same-origin policy: any page may open
// ws://127.0.0.1:8080 and have tether add the upstream credentials. Browsers
// always send Origin on a WebSocket handshake, native apps usually do not, so
// an Origin that is not listed is refused. A page on a domain the attacker
// re-points at 127.0.0.1 (DNS rebinding) shows in the Host header, so a Host
// that is not a loopback name or the address the app connected to is refused
// as well. Both answer 403: the request is understood and refused, and 421
// (Misdirected Request) would invite clients to retry it on another connection
// (RFC 9110 §15.5.20), which cannot help.
//
// The proxy applies both checks to WebSocket handshakes and to the requests
// of an sse:// listener, and answers a refusal with 403.
// CORS keeps a foreign page from reading a response that does not allow
// it, but the request would still start a session and a dial with the
// upstream credentials; browsers send Origin on a cross-origin EventSource
// request, and a rebinding page, same-origin as far as its browser knows,
// sends none, which is what the Host check is for.

// AnyOrigin, alone in the allowed origins, accepts every Origin.
const AnyOrigin = "*"

// defaultPorts are dropped from origins before they are compared, as browsers
// drop them when they serialise an origin (http://localhost:80 is sent as
// http://localhost).
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// NormalizeOrigin returns origin (scheme://host[:port], as a browser sends it
// in the Origin header) in the form tether compares: scheme and host in lower
// case, a default port dropped. Anything else, a path (even "/"), userinfo,
// the opaque origin "null", is an error.
func NormalizeOrigin(origin string) (string, error) {
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok || !isScheme(scheme) {
		return "", errors.New("not an origin: want scheme://host[:port]")
	}
	if i := strings.IndexAny(rest, "/?#@ \t"); i >= 0 {
		return "", fmt.Errorf("not an origin: unexpected %q after the host (no path, query or userinfo)", rest[i])
	}
	host, port, err := splitOriginHost(rest)
	if err != nil {
		return "", err
	}
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	if port == "" || port == defaultPorts[scheme] {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// isScheme reports whether s is an RFC 3986 §3.1 scheme.
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// splitOriginHost splits host[:port], checking both. An IPv6 host comes back
// in its canonical form, the port without leading zeros.
func splitOriginHost(hostport string) (host, port string, err error) {
	host, rest := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", errors.New("not an origin: unclosed [ in the host")
		}
		a, err := netip.ParseAddr(hostport[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", "", fmt.Errorf("not an origin: invalid IPv6 address %q", hostport[:end+1])
		}
		host, rest = "["+a.String()+"]", hostport[end+1:]
	} else {
		if i := strings.IndexByte(hostport, ':'); i >= 0 {
			host, rest = hostport[:i], hostport[i:]
		}
		if !isHostName(host) {
			return "", "", fmt.Errorf("not an origin: invalid host %q", host)
		}
	}
	if rest == "" {
		return host, "", nil
	}
	if rest[0] != ':' {
		return "", "", fmt.Errorf("not an origin: unexpected %q after the host", rest)
	}
	n, err := strconv.ParseUint(rest[1:], 10, 16)
	if err != nil || n == 0 {
		return "", "", fmt.Errorf("not an origin: invalid port %q", rest[1:])
	}
	return host, strconv.FormatUint(n, 10), nil
}

// isHostName accepts what browsers put in an origin's host besides an IPv6
// literal: letters, digits, '-', '_' and '.' (internationalised names arrive
// in punycode).
func isHostName(h string) bool {
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return h != ""
}

// Guard holds the Origin and Host rules, compiled once by NewGuard. It is
// read-only after NewGuard, so any number of goroutines may use it. Its
// checks run inside gobwas' header callbacks for every handshake, so they
// stay allocation-light: map lookups keyed by string(b) and case-insensitive
// comparisons do not copy, and only a Host that is an IP literal costs one
// small allocation (the string netip parses).
type Guard struct {
	anyOrigin bool
	origins   map[string]struct{} // normalised
	hosts     []string            // extra Host names (the listen host), lower case
}

// NewGuard compiles the allowed origins (AnyOrigin, or scheme://host[:port]
// each, normalised by NormalizeOrigin) and the Host names accepted besides
// loopback names and the address the app connected to.
func NewGuard(origins, hosts []string) (*Guard, error) {
	g := &Guard{origins: map[string]struct{}{}}
	for _, o := range origins {
		if o == AnyOrigin {
			g.anyOrigin = true
			continue
		}
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		g.origins[n] = struct{}{}
	}
	for _, h := range hosts {
		g.hosts = append(g.hosts, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	return g, nil
}

// CheckOrigin refuses an Origin header that is not allowed. The header as
// sent is looked up first: browsers send origins already normalised.
func (g *Guard) CheckOrigin(v []byte) error {
	if g.anyOrigin {
		return nil
	}
	if _, ok := g.origins[string(v)]; ok {
		return nil
	}
	if n, err := NormalizeOrigin(string(v)); err == nil {
		if _, ok := g.origins[n]; ok {
			return nil
		}
	}
	return fmt.Errorf("origin %q is not allowed: list it in TETHER_ALLOWED_ORIGINS", v)
}

// CheckHost refuses a Host header that names neither a loopback host nor the
// address the app connected to (local) nor an extra allowed name. The port is
// ignored: a forwarded port (docker -p, kubectl port-forward) changes it, and
// rebinding is about the name.
func (g *Guard) CheckHost(v []byte, local net.Addr) error {
	h := bytes.TrimSuffix(hostOnly(v), []byte("."))
	if g.allowedHost(h, local) {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback name or the listen address (DNS rebinding protection)", v)
}

func (g *Guard) allowedHost(h []byte, local net.Addr) bool {
	if isLocalhostName(h) {
		return true
	}
	for _, name := range g.hosts {
		if bytes.EqualFold(h, []byte(name)) {
			return true
		}
	}
	ip, err := netip.ParseAddr(string(h))
	if err != nil || ip.Zone() != "" {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return true
	}
	if tcp, ok := local.(*net.TCPAddr); ok {
		if l, ok := netip.AddrFromSlice(tcp.IP); ok && l.Unmap() == ip {
			return true
		}
	}
	return false
}

// isLocalhostName reports "localhost" and its subdomains: RFC 6761 §6.3 has
// them resolve to loopback, and browsers do so without asking DNS, so no
// attacker can point one elsewhere.
func isLocalhostName(h []byte) bool {
	const name = "localhost"
	n := len(h)
	switch {
	case n == len(name):
		return bytes.EqualFold(h, []byte(name))
	case n > len(name)+1:
		return h[n-len(name)-1] == '.' && bytes.EqualFold(h[n-len(name):], []byte(name))
	}
	return false
}

// hostOnly strips the port from a Host header value: "[::1]:8080" → "::1",
// "localhost:8080" → "localhost".
func hostOnly(v []byte) []byte {
	if len(v) > 0 && v[0] == '[' {
		if end := bytes.IndexByte(v, ']'); end > 0 {
			return v[1:end]
		}
		return v
	}
	if i := bytes.LastIndexByte(v, ':'); i >= 0 && bytes.IndexByte(v[:i], ':') < 0 {
		return v[:i]
	}
	return v // no port, or a bare IPv6 address
}
