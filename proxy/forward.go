package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gobwas/ws"
)

// Path forwarding (TETHER_FORWARD_PATH): each WebSocket app's request path
// and query are joined onto the upstream URL, so one tether can serve apps
// that connect to ws://127.0.0.1:8080/prices?symbol=X and
// ws://127.0.0.1:8080/orders with the upstream's base URL in front.
//
// The join rules, in order:
//
//   - The request target must be a path (RFC 9112 §3.2.1 origin-form,
//     starting with one "/"). An absolute URI (ws://other/...), an
//     authority, "*" and a target starting with "//" (which URL parsers
//     read as another host) are refused.
//   - A fragment ("#...") is dropped: it never belongs in a request.
//   - Percent-encodings are kept as the app sent them: %2F stays %2F, so
//     an encoded slash is never turned into a path separator, and %41 is
//     not decoded to A. A "%" not followed by two hex digits is refused.
//     Bytes a URI cannot hold as they are (space, non-ASCII, "\", "|", ...)
//     are percent-encoded; control characters are refused.
//   - Dot segments ("." and "..", encoded as %2E too) are resolved within
//     the app's path (RFC 3986 §5.2.4). A ".." that would climb above the
//     app's root is refused rather than clamped: no client that means well
//     sends one, and a silent rewrite would hide the attempt. The same
//     holds when %2F and %5C (or "\") are read as separators, as some
//     servers do: "/..%2Fadmin" is refused too. The result can never leave
//     the upstream URL's base path.
//   - The resolved path is appended to the base path with exactly one "/"
//     between them. The app's path "/" (what every client sends for a URL
//     without a path) leaves the base path as it is.
//   - The query is the base URL's query, then the app's, joined by "&",
//     each kept byte for byte: duplicate keys stay, in order. A server that
//     takes the first value of a key therefore sees the base URL's.
//   - The base URL's fragment is dropped too.
//
// A refused target is answered with HTTP 400 before anything else happens:
// the app is not admitted and the upstream is never dialled.

// forwardPath joins the app's request target onto the upstream URL when
// TETHER_FORWARD_PATH is on; a target that cannot be joined refuses the
// handshake with 400.
func (sess *Session) forwardPath(uri []byte) error {
	base := sess.srv.forwardBase
	if base == nil {
		return nil
	}
	u, err := joinUpstream(base, string(uri))
	if err != nil {
		return ws.RejectConnectionError(ws.RejectionStatus(http.StatusBadRequest), ws.RejectionReason(oneLine(err.Error())))
	}
	sess.upstreamURL = u.String()
	return nil
}

// joinUpstream joins an app's request target onto base following the rules
// above. The result's EscapedPath and RawQuery are what the upstream
// receives in its request line.
func joinUpstream(base *url.URL, requestURI string) (*url.URL, error) {
	target, _, _ := strings.Cut(requestURI, "#")
	if err := checkOriginForm(target); err != nil {
		return nil, err
	}
	rawPath, rawQuery, _ := strings.Cut(target, "?")
	appPath, err := cleanComponent(rawPath, pathChars)
	if err != nil {
		return nil, fmt.Errorf("request path: %w", err)
	}
	appQuery, err := cleanComponent(rawQuery, queryChars)
	if err != nil {
		return nil, fmt.Errorf("request query: %w", err)
	}
	if appPath, err = resolveDots(appPath); err != nil {
		return nil, err
	}
	if err := checkNoClimb(appPath); err != nil {
		return nil, err
	}
	return joined(base, appPath, appQuery)
}

// checkOriginForm refuses request targets that are not a path.
func checkOriginForm(target string) error {
	switch {
	case target == "":
		return errors.New("empty request target")
	case strings.HasPrefix(target, "//"):
		return errors.New("request path starts with // (read as another host by URL parsers)")
	case target[0] != '/':
		return fmt.Errorf("request target %q is not a path: absolute URIs and authorities are not forwarded", clip(target))
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Characters a path segment and a query may hold unencoded (RFC 3986 §3.3,
// §3.4): unreserved, sub-delims, ":" and "@", plus "/" (and "?" in a query).
// "%" starts an encoding and is checked apart.
const (
	uriUnreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	uriSubDelims  = "!$&'()*+,;="
	pathChars     = uriUnreserved + uriSubDelims + ":@/"
	queryChars    = pathChars + "?"
)

// cleanComponent checks the percent-encodings of s, refuses control
// characters and percent-encodes every other byte outside allowed. An s
// that needs no encoding is returned as is.
func cleanComponent(s, allowed string) (string, error) {
	clean := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", fmt.Errorf("invalid percent-encoding at byte %d", i)
			}
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("control character 0x%02x at byte %d", c, i)
		case strings.IndexByte(allowed, c) < 0:
			clean = false
		}
	}
	if clean {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '%' && strings.IndexByte(allowed, c) < 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// errClimb refuses a path whose ".." segments climb above its root.
var errClimb = errors.New("request path climbs above its root with \"..\"")

// resolveDots removes the dot segments of an absolute path (RFC 3986
// §5.2.4), refusing a ".." with no segment left to remove. As in the RFC, a
// path ending in a dot segment keeps a final "/".
func resolveDots(p string) (string, error) {
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		switch dotSegment(seg) {
		case dotNone:
			out = append(out, seg)
			continue
		case dotParent:
			if len(out) == 0 {
				return "", errClimb
			}
			out = out[:len(out)-1]
		}
		if i == len(segs)-1 {
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/"), nil
}

// checkNoClimb refuses a path that would climb above its root on a server
// that takes %2F, %5C or "\" for a separator (the last arrives here as %5C).
func checkNoClimb(p string) error {
	loose := strings.NewReplacer("%2f", "/", "%5c", "/").Replace(strings.ToLower(p))
	depth := 0
	for _, seg := range strings.Split(loose, "/") {
		switch dotSegment(seg) {
		case dotParent:
			if depth--; depth < 0 {
				return errClimb
			}
		case dotNone:
			if seg != "" {
				depth++
			}
		}
	}
	return nil
}

const (
	dotNone   = iota // a name
	dotSelf          // "."
	dotParent        // ".."
)

// dotSegment classifies a segment, reading %2E as "." (RFC 3986 §2.3: an
// encoded unreserved character is the same character).
func dotSegment(seg string) int {
	if len(seg) > 6 || strings.Trim(seg, ".%2eE") != "" {
		return dotNone
	}
	switch strings.ReplaceAll(strings.ToLower(seg), "%2e", ".") {
	case ".":
		return dotSelf
	case "..":
		return dotParent
	}
	return dotNone
}

// joined puts the resolved app path and query onto base.
func joined(base *url.URL, appPath, appQuery string) (*url.URL, error) {
	u := *base
	u.Fragment, u.RawFragment, u.ForceQuery = "", "", false
	p := base.EscapedPath()
	if appPath != "/" {
		p = strings.TrimSuffix(p, "/") + appPath
	}
	var err error
	if u.Path, err = url.PathUnescape(p); err != nil {
		return nil, fmt.Errorf("joined path: %w", err)
	}
	u.RawPath = p
	u.RawQuery = joinQuery(base.RawQuery, appQuery)
	return &u, nil
}

func joinQuery(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "&" + b
}

// upstreamPath returns the path of a joined upstream URL, for logs (its
// query may hold credentials).
func upstreamPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.EscapedPath()
}

// parseForwardBase parses the upstream URL that app paths are joined onto.
// The error leaves the URL out: it may hold credentials.
func parseForwardBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("upstream URL cannot take forwarded paths: %w", err)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errors.New("upstream URL cannot take forwarded paths: want scheme://host[/path]")
	}
	return u, nil
}
