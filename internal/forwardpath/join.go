package forwardpath

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Join joins an app's request target onto base following the rules of
// the package documentation. The result's EscapedPath and RawQuery are what the upstream
// receives in its request line.
func Join(base *url.URL, requestURI string) (*url.URL, error) {
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
	if err := checkNoDotParams(appPath); err != nil {
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

// clip shortens s for an error message, at a character boundary: the
// message becomes a charset=utf-8 body.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
	loose := looseSeparators.Replace(strings.ToLower(p))
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

// looseSeparators reads %2F, %5C (and "\", which arrives here as %5C) as
// separators, as some servers do. Its input is lower-cased.
var looseSeparators = strings.NewReplacer("%2f", "/", "%5c", "/")

// checkNoDotParams refuses a dot segment followed by a path parameter (";"
// or %3B), under "/" and under the separators some servers add.
func checkNoDotParams(p string) error {
	for _, seg := range strings.Split(looseSeparators.Replace(strings.ToLower(p)), "/") {
		name, _, hasParam := strings.Cut(strings.ReplaceAll(seg, "%3b", ";"), ";")
		if hasParam && dotSegment(name) != dotNone {
			return fmt.Errorf("request path segment %q is a dot segment with a path parameter, "+
				"which servers that strip \";\" parameters read as %q", clip(seg), dotName(name))
		}
	}
	return nil
}

// dotName is the dot segment a server reads for name: "." or "..".
func dotName(name string) string {
	if dotSegment(name) == dotParent {
		return ".."
	}
	return "."
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

// ParseBase parses the upstream URL that app paths are joined onto.
// The error leaves the URL out: it may hold credentials.
func ParseBase(raw string) (*url.URL, error) {
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
