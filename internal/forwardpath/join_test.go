package forwardpath

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// readmeBase is the upstream URL of the README's examples.
const readmeBase = "wss://feed.example.com/v1?key=K"

// The join rules of the package documentation, one case each, with the tricky inputs:
// dot segments plain and encoded, encoded slashes, duplicate query keys,
// fragments, and targets that are not paths.
func TestJoinUpstream(t *testing.T) {
	tests := []struct {
		name, base, target string
		want               string // the URL the upstream is dialled with; "" when refused
	}{
		// Paths: one slash between base and app path; "/" keeps the base.
		{"root keeps the base", "ws://up/v1", "/", "ws://up/v1"},
		{"root keeps a base ending in /", "ws://up/v1/", "/", "ws://up/v1/"},
		{"root on an empty base", "ws://up", "/", "ws://up"},
		{"path onto a base", "ws://up/v1", "/prices", "ws://up/v1/prices"},
		{"path onto a base ending in /", "ws://up/v1/", "/prices", "ws://up/v1/prices"},
		{"path onto an empty base", "ws://up", "/prices", "ws://up/prices"},
		{"path onto base /", "ws://up/", "/prices", "ws://up/prices"},
		{"trailing slash kept", "ws://up/v1", "/a/b/", "ws://up/v1/a/b/"},
		{"empty segments kept", "ws://up/v1", "/a//b", "ws://up/v1/a//b"},
		{"port and scheme kept", "wss://up:8443/v1", "/a", "wss://up:8443/v1/a"},
		{"userinfo kept", "ws://u:p@up/v1", "/a", "ws://u:p@up/v1/a"},

		// Dot segments: resolved inside the app path, never above it.
		{"dot", "ws://up/v1", "/a/./b", "ws://up/v1/a/b"},
		{"dot dot", "ws://up/v1", "/a/b/../c", "ws://up/v1/a/c"},
		{"dot dot to the root", "ws://up/v1", "/a/..", "ws://up/v1"},
		{"dot dot ending in a slash", "ws://up/v1", "/a/b/..", "ws://up/v1/a/"},
		{"dot at the end", "ws://up/v1", "/a/.", "ws://up/v1/a/"},
		{"lone dot", "ws://up/v1", "/.", "ws://up/v1"},
		{"encoded dot dot", "ws://up/v1", "/a/%2e%2E/b", "ws://up/v1/b"},
		{"half-encoded dot dot", "ws://up/v1", "/a/.%2E/b", "ws://up/v1/b"},
		{"dots inside names are names", "ws://up/v1", "/a../..b/.c./...", "ws://up/v1/a../..b/.c./..."},
		{"climbing above the root", "ws://up/v1", "/..", ""},
		{"climbing above the root later", "ws://up/v1", "/a/../../b", ""},
		{"climbing encoded", "ws://up/v1", "/%2e%2e/admin", ""},
		{"climbing through an encoded slash", "ws://up/v1", "/..%2Fadmin", ""},
		{"climbing through encoded slashes", "ws://up/v1", "/a/..%2f..%2fadmin", ""},
		{"climbing through an encoded backslash", "ws://up/v1", "/..%5Cadmin", ""},
		{"climbing through a backslash", "ws://up/v1", `/..\admin`, ""},
		{"dot dot behind an encoded slash that stays inside", "ws://up/v1", "/a%2F..%2Fb", "ws://up/v1/a%2F..%2Fb"},

		// Dot segments with a path parameter: a server that strips ";…"
		// (Tomcat, Jetty, Spring) reads "..;" as "..", after tether's check.
		{"the issue's dot dot with parameters", "ws://up/v1", "/v1/feed/..;/..;/admin", ""},
		{"dot dot with an empty parameter", "ws://up/v1", "/a/b/..;/c", ""},
		{"dot dot with a parameter", "ws://up/v1", "/a/..;jsessionid=x/b", ""},
		{"dot dot with an encoded semicolon", "ws://up/v1", "/a/..%3B/b", ""},
		{"dot dot with a lower-case encoded semicolon", "ws://up/v1", "/a/..%3b/b", ""},
		{"encoded dot dot with a parameter", "ws://up/v1", "/a/%2e%2E;/b", ""},
		{"dot with a parameter", "ws://up/v1", "/a/.;/b", ""},
		{"dot with an encoded semicolon", "ws://up/v1", "/a/.%3B/b", ""},
		{"dot dot with a parameter at the end", "ws://up/v1", "/a/..;", ""},
		{"dot dot with a parameter behind an encoded slash", "ws://up/v1", "/a%2F..;%2Fb", ""},
		{"dot dot with a parameter behind an encoded backslash", "ws://up/v1", "/a%5C..;x%5Cb", ""},
		{"names with parameters kept", "ws://up/v1", "/a;v=1/b;x/..c;/c..;", "ws://up/v1/a;v=1/b;x/..c;/c..;"},

		// Encodings: kept as sent; bytes a URI cannot hold are encoded.
		{"encoded slash kept", "ws://up/v1", "/a%2Fb", "ws://up/v1/a%2Fb"},
		{"lower-case encoded slash kept", "ws://up/v1", "/a%2fb", "ws://up/v1/a%2fb"},
		{"encoded letter not decoded", "ws://up/v1", "/%41", "ws://up/v1/%41"},
		{"encoded base path kept", "ws://up/a%2Fb", "/c", "ws://up/a%2Fb/c"},
		{"raw UTF-8 encoded", "ws://up/v1", "/café", "ws://up/v1/caf%C3%A9"},
		{"space and pipe encoded", "ws://up/v1", "/a b|c", "ws://up/v1/a%20b%7Cc"},
		{"sub-delims kept", "ws://up/v1", "/a;b=c,d:e@f!$&'()*+", "ws://up/v1/a;b=c,d:e@f!$&'()*+"},
		{"bad percent-encoding", "ws://up/v1", "/a%zz", ""},
		{"truncated percent-encoding", "ws://up/v1", "/a%2", ""},
		{"control character", "ws://up/v1", "/a\x00b", ""},
		{"DEL", "ws://up/v1", "/a\x7f", ""},

		// Queries: base first, then the app's, duplicates kept in order.
		{"app query", "ws://up/v1", "/a?x=1", "ws://up/v1/a?x=1"},
		{"duplicate keys kept in order", "ws://up/v1", "/a?x=1&x=2&y=3&x=0", "ws://up/v1/a?x=1&x=2&y=3&x=0"},
		{"base query first", "ws://up/v1?token=t&x=base", "/a?x=app", "ws://up/v1/a?token=t&x=base&x=app"},
		{"base query alone", "ws://up/v1?token=t", "/a", "ws://up/v1/a?token=t"},
		{"empty app query", "ws://up/v1?token=t", "/a?", "ws://up/v1/a?token=t"},
		{"query on the root", "ws://up/v1", "/?x=1", "ws://up/v1?x=1"},
		{"query keeps its encoding", "ws://up/v1", "/a?q=a%26b+c&r=%2F", "ws://up/v1/a?q=a%26b+c&r=%2F"},
		{"query may hold / and ?", "ws://up/v1", "/a?next=/b?c", "ws://up/v1/a?next=/b?c"},
		{"dots in a query are not segments", "ws://up/v1", "/a?p=../..", "ws://up/v1/a?p=../.."},
		{"query bytes encoded", "ws://up/v1", "/a?q=x y\"", "ws://up/v1/a?q=x%20y%22"},
		{"bad query encoding", "ws://up/v1", "/a?q=%g0", ""},

		// Fragments are dropped, from the target and from the base.
		{"fragment dropped", "ws://up/v1", "/a#frag", "ws://up/v1/a"},
		{"fragment after a query dropped", "ws://up/v1", "/a?x=1#frag", "ws://up/v1/a?x=1"},
		{"base fragment dropped", "ws://up/v1#top", "/a", "ws://up/v1/a"},

		// The README's examples.
		{"readme root", readmeBase, "/", "wss://feed.example.com/v1?key=K"},
		{"readme path", readmeBase, "/prices", "wss://feed.example.com/v1/prices?key=K"},
		{"readme trailing slash", readmeBase, "/prices/", "wss://feed.example.com/v1/prices/?key=K"},
		{"readme dots", readmeBase, "/a/./b/../c", "wss://feed.example.com/v1/a/c?key=K"},
		{"readme dots to the root", readmeBase, "/a/..", "wss://feed.example.com/v1?key=K"},
		{"readme encoded slash", readmeBase, "/us%2Fwest", "wss://feed.example.com/v1/us%2Fwest?key=K"},
		{"readme utf-8", readmeBase, "/café", "wss://feed.example.com/v1/caf%C3%A9?key=K"},
		{"readme duplicate keys", readmeBase, "/t?s=A&s=B", "wss://feed.example.com/v1/t?key=K&s=A&s=B"},
		{"readme the app's key second", readmeBase, "/t?key=mine", "wss://feed.example.com/v1/t?key=K&key=mine"},
		{"readme trailing-slash base", "wss://feed.example.com/v1/", "/prices", "wss://feed.example.com/v1/prices"},

		// Targets that are not paths.
		{"absolute URI", "ws://up/v1", "ws://evil.example/x", ""},
		{"absolute http URI", "ws://up/v1", "http://evil.example/x", ""},
		{"network-path reference", "ws://up/v1", "//evil.example/x", ""},
		{"authority form", "ws://up/v1", "evil.example:443", ""},
		{"asterisk", "ws://up/v1", "*", ""},
		{"empty", "ws://up/v1", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, err := ParseBase(tc.base)
			if err != nil {
				t.Fatalf("ParseBase(%q): %v", tc.base, err)
			}
			u, err := Join(base, tc.target)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("Join(%q, %q) = %q, want a refusal", tc.base, tc.target, u)
			case tc.want == "":
				return
			case err != nil:
				t.Fatalf("Join(%q, %q): %v, want %q", tc.base, tc.target, err, tc.want)
			}
			if got := u.String(); got != tc.want {
				t.Errorf("Join(%q, %q) = %q, want %q", tc.base, tc.target, got, tc.want)
			}
			checkRequestLine(t, u)
		})
	}
}

// checkRequestLine checks that the joined URL reaches the upstream as
// built: gobwas parses the URL string with url.ParseRequestURI and writes
// RequestURI() in the request line, which must keep the encodings.
func checkRequestLine(t *testing.T, u *url.URL) {
	t.Helper()
	again, err := url.ParseRequestURI(u.String())
	if err != nil {
		t.Fatalf("the dialer cannot parse %q: %v", u, err)
	}
	want := u.EscapedPath()
	if want == "" {
		want = "/"
	}
	if u.RawQuery != "" {
		want += "?" + u.RawQuery
	}
	if got := again.RequestURI(); got != want {
		t.Errorf("request line target %q, want %q", got, want)
	}
}

// A joined path never leaves the base path, whatever the app sends: every
// accepted target's result starts with the base path, and what follows
// never climbs above it, under "/" alone or with %2F and %5C taken for
// separators.
func TestJoinUpstreamStaysUnderBase(t *testing.T) {
	base, err := ParseBase("ws://up/v1/tenant")
	if err != nil {
		t.Fatal(err)
	}
	parts := []string{"a", ".", "..", "%2e", "%2E%2e", "", "%2F", "..%2F", "%5C..", "b%2f..", "\\", "?", "#",
		"..;", ".;x", "..%3B", "a;b"}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if depth == 0 {
			return
		}
		for _, p := range parts {
			target := prefix + "/" + p
			checkStaysUnder(t, base, target)
			walk(target, depth-1)
		}
	}
	walk("", 4)
}

func checkStaysUnder(t *testing.T, base *url.URL, target string) {
	t.Helper()
	u, err := Join(base, target)
	if err != nil {
		return
	}
	p := u.EscapedPath()
	if p != "/v1/tenant" && !strings.HasPrefix(p, "/v1/tenant/") {
		t.Fatalf("target %q joined to %q: outside the base path", target, p)
	}
	rest := strings.TrimPrefix(p, "/v1/tenant")
	for _, sep := range []*strings.Replacer{strings.NewReplacer(), strings.NewReplacer("%2f", "/", "%5c", "/")} {
		depth := 0
		for _, seg := range strings.Split(sep.Replace(strings.ToLower(rest)), "/") {
			// What a server that strips path parameters sees.
			seg, _, _ = strings.Cut(strings.ReplaceAll(seg, "%3b", ";"), ";")
			switch {
			case seg == ".." || seg == "%2e%2e" || seg == ".%2e" || seg == "%2e.":
				depth--
			case seg != "" && seg != "." && seg != "%2e":
				depth++
			}
			if depth < 0 {
				t.Fatalf("target %q joined to %q: climbs above the base path", target, p)
			}
		}
	}
}

// A refusal quoting a long target cuts it at a character boundary, not
// into a byte its quoting then shows as \xc3.
func TestJoinUpstreamErrorIsUTF8(t *testing.T) {
	base, err := ParseBase("ws://up/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"x" + strings.Repeat("é", 40), "/" + strings.Repeat("é", 40) + "/..;/x"} {
		_, err := Join(base, target)
		if err == nil || !utf8.ValidString(err.Error()) || strings.Contains(err.Error(), `\x`) {
			t.Errorf("Join(%q) error %q, want a refusal quoting whole characters", target, err)
		}
	}
}

// The base URL is refused when it cannot take a path.
func TestParseForwardBase(t *testing.T) {
	for _, raw := range []string{"ws://up/v1", "wss://user:secret@up:1/x?y=1"} {
		if _, err := ParseBase(raw); err != nil {
			t.Errorf("ParseBase(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{"ws:opaque", "/just/a/path", "ws://up/%zz"} {
		if _, err := ParseBase(raw); err == nil {
			t.Errorf("ParseBase(%q) accepted", raw)
		}
	}
	_, err := ParseBase("ws://user:secret@up/%zz")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("ParseBase error %v: want a refusal that does not quote the credentials", err)
	}
}
