package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tetherproxy/tether/proxy"
)

// Listener is one TETHER_LISTEN entry: where apps connect and the protocol
// they speak there.
type Listener struct {
	Kind proxy.ListenerKind
	// Addr is host:port for ws, tcp and sse, the socket's absolute path for
	// unix.
	Addr string
	// Path is the event stream's request path, for sse ("/" when the entry
	// has none).
	Path string
	// Pos is the entry's 1-based position in TETHER_LISTEN, for messages.
	Pos int
}

// String is the entry in canonical form: ws://127.0.0.1:8080,
// tcp://127.0.0.1:7000, unix:///run/tether.sock,
// sse://127.0.0.1:8081/events.
func (l Listener) String() string {
	return string(l.Kind) + "://" + l.Addr + l.Path
}

// IsLoopback reports whether only this machine can reach the listener. A
// unix socket is never on the network: its file mode decides who connects.
func (l Listener) IsLoopback() bool {
	return l.Kind == proxy.ListenerUnix || isLoopbackAddr(l.Addr)
}

// ListenList holds TETHER_LISTEN: one or more listeners, all serving the same
// upstream configuration.
type ListenList []Listener

// UnmarshalText parses comma-separated entries: host:port or ws://host:port
// (WebSocket), tcp://host:port (lines), unix:///absolute/path (WebSocket over
// a unix socket), sse://host:port/path (Server-Sent Events, the path "/"
// when left out). Blank entries are ignored. Every bad entry is reported, by
// position and as written, in one line.
func (l *ListenList) UnmarshalText(text []byte) error {
	var out ListenList
	var bad []string
	for i, entry := range strings.Split(string(text), ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ln, err := parseListener(entry)
		if err != nil {
			bad = append(bad, fmt.Sprintf("entry %d %q: %v", i+1, entry, err))
			continue
		}
		ln.Pos = i + 1
		out = append(out, ln)
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	if len(out) == 0 {
		return errors.New("no listener: " + listenSchemes)
	}
	if err := out.checkOverlap(); err != nil {
		return err
	}
	*l = out
	return nil
}

// parseListener parses one entry; a bare host:port is a WebSocket listener,
// as TETHER_LISTEN always was.
func parseListener(entry string) (Listener, error) {
	scheme, rest, ok := strings.Cut(entry, "://")
	if !ok {
		scheme, rest = "ws", entry
	}
	switch kind := proxy.ListenerKind(strings.ToLower(scheme)); kind {
	case proxy.ListenerWS, proxy.ListenerTCP:
		addr, err := parseNetworkEntry(kind, rest)
		return Listener{Kind: kind, Addr: addr}, err
	case proxy.ListenerUnix:
		p, err := parseUnixEntry(rest)
		return Listener{Kind: kind, Addr: p}, err
	case proxy.ListenerSSE:
		addr, p, err := parseSSEEntry(rest)
		return Listener{Kind: kind, Addr: addr, Path: p}, err
	case "wss":
		return Listener{}, errors.New("wss:// is not served: the app listener speaks plain WebSocket on a local socket; terminate TLS in front of tether")
	}
	return Listener{}, fmt.Errorf("unknown scheme %q: %s", scheme, listenSchemes)
}

// listenSchemes lists the forms of a TETHER_LISTEN entry, for messages.
const listenSchemes = "use host:port, ws://host:port, tcp://host:port, unix:///path or sse://host:port/path"

// parseSSEEntry checks the host:port and path of an sse:// entry. The
// path is where the event stream is served, matched exactly; "/" when the
// entry has none, so sse://127.0.0.1:8081 serves http://127.0.0.1:8081/.
// It is written as the app's URL has it and must need no
// percent-encoding, so what is configured is what is compared; a query,
// a fragment, an empty or a dot segment is refused: no request path
// (which clients send normalised) could match it.
func parseSSEEntry(rest string) (hostport, p string, err error) {
	hostport, p = rest, "/"
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		hostport, p = rest[:i], rest[i:]
	}
	if err := checkHostPort(hostport); err != nil {
		return "", "", err
	}
	if err := checkSSEPath(p); err != nil {
		return "", "", err
	}
	return hostport, p, nil
}

// ssePathChars are the bytes an sse:// path may hold: RFC 3986 pchar
// without percent-encodings, and "/".
const ssePathChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/"

func checkSSEPath(p string) error {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return fmt.Errorf("an sse:// entry takes a path, no query or fragment, got %q", p[i:])
	}
	if i := strings.IndexFunc(p, func(r rune) bool { return !strings.ContainsRune(ssePathChars, r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(p[i:])
		return fmt.Errorf("path %q holds %q: write the path with letters, digits, / and -._~!$&'()*+,;=:@ only, without percent-encoding", p, r)
	}
	if strings.Contains(p, "//") {
		return fmt.Errorf("path %q has an empty segment (//)", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("path %q has a dot segment, which clients remove before sending", p)
		}
	}
	return nil
}

// parseNetworkEntry checks the host:port of a ws:// or tcp:// entry. A
// listener has no path: tether answers on every path, so a path here would
// suggest a routing that does not exist. One trailing slash is tolerated,
// since ws://127.0.0.1:8080/ is how the app's URL is usually written.
func parseNetworkEntry(kind proxy.ListenerKind, rest string) (string, error) {
	hostport, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		hostport, tail = rest[:i], rest[i:]
	}
	if tail != "" && tail != "/" {
		msg := fmt.Sprintf("a listener takes no path or query, got %q", tail)
		if kind == proxy.ListenerWS {
			msg += " (apps may use any path; TETHER_FORWARD_PATH=true passes it upstream)"
		}
		return "", errors.New(msg)
	}
	if err := checkHostPort(hostport); err != nil {
		return "", err
	}
	return hostport, nil
}

// parseUnixEntry checks the path of a unix:// entry: absolute, so that the
// socket does not depend on the directory tether was started from, and
// without query or fragment, which would otherwise end up in the file name.
func parseUnixEntry(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("missing socket path: use unix:///absolute/path")
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("socket path %q is not absolute: write unix:// then an absolute path, as in unix:///run/tether.sock (three slashes)", p)
	case strings.ContainsAny(p, "?#"):
		return "", errors.New("a unix:// entry is a path only, without ? or # (the socket's mode is TETHER_UNIX_SOCKET_MODE)")
	case strings.HasSuffix(p, "/"):
		return "", fmt.Errorf("socket path %q names a directory", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "", errors.New("socket path contains a control character")
	}
	return path.Clean(p), nil
}

// checkOverlap refuses two entries that cannot both listen: the same socket
// path, or the same port on the same or a wildcard host (two sse:// paths
// included: one listener serves one path). Port 0 picks a free
// port per listener, so it never collides. Names (localhost) are compared as
// written; one resolving to another entry's address fails at start-up
// instead, with the entry named.
func (l ListenList) checkOverlap() error {
	for i, a := range l {
		for _, b := range l[:i] {
			if !collide(a, b) {
				continue
			}
			if a.Kind == b.Kind && a.Path == b.Path {
				return fmt.Errorf("entry %d %q repeats entry %d %q", a.Pos, a.String(), b.Pos, b.String())
			}
			return fmt.Errorf("entries %d %q and %d %q listen on the same address", b.Pos, b.String(), a.Pos, a.String())
		}
	}
	return nil
}

func collide(a, b Listener) bool {
	aUnix, bUnix := a.Kind == proxy.ListenerUnix, b.Kind == proxy.ListenerUnix
	if aUnix || bUnix {
		return aUnix && bUnix && a.Addr == b.Addr
	}
	ha, pa, _ := net.SplitHostPort(a.Addr)
	hb, pb, _ := net.SplitHostPort(b.Addr)
	if portNumber(pa) != portNumber(pb) || portNumber(pa) == 0 {
		return false
	}
	ka, wa := hostKey(ha)
	kb, wb := hostKey(hb)
	// A wildcard host binds the port on every address, so it collides with
	// any other host on that port.
	return ka == kb || wa || wb
}

func portNumber(p string) uint64 {
	n, _ := strconv.ParseUint(p, 10, 16)
	return n
}

// hostKey is host in a comparable form (IP addresses canonical, names in
// lower case) and whether it is a wildcard (empty, 0.0.0.0, ::).
func hostKey(host string) (key string, wildcard bool) {
	if host == "" {
		return "", true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String(), a.IsUnspecified()
	}
	return strings.ToLower(host), false
}

// validateFor checks what depends on the operating system tether was built
// for (goos is runtime.GOOS; a parameter so every system's rules are tested
// on any one): unix sockets are refused on Windows, and a socket path must
// fit the system's sockaddr_un.
func (l ListenList) validateFor(goos string) error {
	if len(l) == 0 {
		return newProblem("TETHER_LISTEN", "must not be empty")
	}
	var errs []error
	for _, ln := range l {
		if ln.Kind != proxy.ListenerUnix {
			continue
		}
		if goos == "windows" {
			errs = append(errs, newProblem("TETHER_LISTEN",
				"entry %d %q: unix:// listeners are not supported on Windows builds of tether; use ws:// or tcp://", ln.Pos, ln.String()))
			continue
		}
		if limit := maxUnixPath(goos); len(ln.Addr) > limit {
			errs = append(errs, newProblem("TETHER_LISTEN",
				"entry %d %q: socket path is %d bytes, longer than the %d a unix socket address holds on %s",
				ln.Pos, ln.String(), len(ln.Addr), limit, goos))
		}
	}
	return errors.Join(errs...)
}

// maxUnixPath is the longest socket path bind(2) takes: sun_path less its
// terminating NUL, 108 bytes on Linux, 104 on macOS and the BSDs.
func maxUnixPath(goos string) int {
	switch goos {
	case "linux", "android":
		return 107
	}
	return 103
}

// String is the entries in canonical form, comma-separated.
func (l ListenList) String() string {
	parts := make([]string, len(l))
	for i, ln := range l {
		parts[i] = ln.String()
	}
	return strings.Join(parts, ",")
}

// Has reports whether some entry is of kind.
func (l ListenList) Has(kind proxy.ListenerKind) bool {
	return slices.ContainsFunc(l, func(ln Listener) bool { return ln.Kind == kind })
}

// AllowedHosts are the Host names WebSocket and sse:// listeners accept
// besides loopback names and the IP address a connection arrived on: the
// hosts of ws and sse entries that are names (an IP address is covered
// already; a wildcard address names nothing). Unix sockets have no host to
// add, and tcp listeners no HTTP request to check.
func (l ListenList) AllowedHosts() []string {
	var hosts []string
	for _, ln := range l {
		if ln.Kind != proxy.ListenerWS && ln.Kind != proxy.ListenerSSE {
			continue
		}
		host, _, err := net.SplitHostPort(ln.Addr)
		if err != nil || host == "" {
			continue
		}
		if _, err := netip.ParseAddr(host); err == nil {
			continue
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// DefaultSocketMode is TETHER_UNIX_SOCKET_MODE's default: only tether's own
// user may connect. Keep it in step with the envDefault tag.
const DefaultSocketMode SocketMode = 0o600

// SocketMode holds TETHER_UNIX_SOCKET_MODE: the permission bits of unix://
// sockets.
type SocketMode fs.FileMode

// UnmarshalText parses octal permission bits: 0600, 660, 0o660. Bits beyond
// 0777 (setuid, setgid, sticky) mean nothing on a socket, and a mode without
// any write bit lets no one but root connect (connect(2) on a unix socket
// needs write permission): both are mistakes worth stopping for.
func (m *SocketMode) UnmarshalText(text []byte) error {
	v := strings.TrimSpace(string(text))
	digits := strings.TrimPrefix(strings.TrimPrefix(v, "0o"), "0O")
	n, err := strconv.ParseUint(digits, 8, 32)
	switch {
	case err != nil || digits == "":
		return fmt.Errorf("invalid file mode %q: use octal permission bits such as 0600 or 0660", v)
	case n > 0o777:
		return fmt.Errorf("file mode %q sets bits beyond 0777, which mean nothing on a socket", v)
	case n&0o222 == 0:
		return fmt.Errorf("file mode %q lets no one connect: connecting to a unix socket needs write permission", v)
	}
	*m = SocketMode(n)
	return nil
}

// String is the mode in octal with a leading 0, as written in the variable.
func (m SocketMode) String() string {
	return fmt.Sprintf("%#o", uint32(m))
}

// checkHostPort checks a host:port listen address; port 0 picks a free one.
func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("invalid address %q: use host:port", v)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("invalid port %q in %q", port, v)
	}
	if strings.ContainsAny(host, "/ ") {
		return fmt.Errorf("invalid host %q in %q", host, v)
	}
	return nil
}

// isLoopbackAddr reports whether hostport names localhost or a loopback IP.
// An empty host listens on every interface, so it is not loopback.
func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
