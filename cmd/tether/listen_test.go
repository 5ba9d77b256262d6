package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/sse"
	"github.com/tetherproxy/tether/proxy"
)

func TestListenAccepted(t *testing.T) {
	tests := []struct {
		in       string
		want     string // listenList.String()
		loopback []bool
	}{
		{"127.0.0.1:8080", "ws://127.0.0.1:8080", []bool{true}},
		{"ws://127.0.0.1:8080", "ws://127.0.0.1:8080", []bool{true}},
		{"WS://localhost:8080/", "ws://localhost:8080", []bool{true}},
		{"[::1]:8080", "ws://[::1]:8080", []bool{true}},
		{"0.0.0.0:8080", "ws://0.0.0.0:8080", []bool{false}},
		{":8080", "ws://:8080", []bool{false}},
		{"10.1.2.3:0", "ws://10.1.2.3:0", []bool{false}},
		{"tcp://127.0.0.1:7000", "tcp://127.0.0.1:7000", []bool{true}},
		{"tcp://0.0.0.0:7000/", "tcp://0.0.0.0:7000", []bool{false}},
		{"unix:///run/tether.sock", "unix:///run/tether.sock", []bool{true}},
		{"unix:///run//tether/./x.sock", "unix:///run/tether/x.sock", []bool{true}},
		{
			" 127.0.0.1:8080 , tcp://127.0.0.1:7000,unix:///run/t.sock,",
			"ws://127.0.0.1:8080,tcp://127.0.0.1:7000,unix:///run/t.sock", []bool{true, true, true},
		},
		// Port 0 picks a free port per listener: no collision.
		{"127.0.0.1:0,tcp://127.0.0.1:0", "ws://127.0.0.1:0,tcp://127.0.0.1:0", []bool{true, true}},
		{"sse://127.0.0.1:8081/events", "sse://127.0.0.1:8081/events", []bool{true}},
		{"SSE://localhost:8081", "sse://localhost:8081/", []bool{true}},
		{"sse://0.0.0.0:8081/", "sse://0.0.0.0:8081/", []bool{false}},
		{"sse://[::1]:8081/v1/stream;x=1/@me/", "sse://[::1]:8081/v1/stream;x=1/@me/", []bool{true}},
		{"127.0.0.1:8080,sse://127.0.0.1:8081/events", "ws://127.0.0.1:8080,sse://127.0.0.1:8081/events", []bool{true, true}},
		// Different hosts, or IPv4 and IPv6 loopback, on one port.
		{"127.0.0.1:8080,tcp://127.0.0.2:8080,[::1]:8080", "ws://127.0.0.1:8080,tcp://127.0.0.2:8080,ws://[::1]:8080", []bool{true, true, true}},
	}
	for _, tt := range tests {
		var l listenList
		if err := l.UnmarshalText([]byte(tt.in)); err != nil {
			t.Errorf("UnmarshalText(%q): %v", tt.in, err)
			continue
		}
		if l.String() != tt.want {
			t.Errorf("UnmarshalText(%q) = %q, want %q", tt.in, l.String(), tt.want)
		}
		for i, ln := range l {
			if i < len(tt.loopback) && ln.isLoopback() != tt.loopback[i] {
				t.Errorf("%q entry %d: loopback = %v, want %v", tt.in, i+1, ln.isLoopback(), tt.loopback[i])
			}
		}
	}
}

func TestListenEntryPositions(t *testing.T) {
	var l listenList
	if err := l.UnmarshalText([]byte("127.0.0.1:1,,tcp://127.0.0.1:2")); err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].pos != 1 || l[1].pos != 3 || l[1].kind != proxy.ListenerTCP || l[1].addr != "127.0.0.1:2" {
		t.Fatalf("parsed %+v, want entries at positions 1 and 3 (blank skipped), the second tcp", l)
	}
}

// Every refusal names the entry by position and as written, and says why.
func TestListenRefused(t *testing.T) {
	tests := map[string]string{
		"":                                      "no listener",
		" , ":                                   "no listener",
		"127.0.0.1":                             `entry 1 "127.0.0.1": invalid address`,
		"h:-1":                                  `entry 1 "h:-1": invalid port`,
		"http://127.0.0.1:8080":                 `entry 1 "http://127.0.0.1:8080": unknown scheme "http"`,
		"udp://127.0.0.1:8080":                  `entry 1 "udp://127.0.0.1:8080": unknown scheme "udp"`,
		"wss://127.0.0.1:8443":                  `entry 1 "wss://127.0.0.1:8443": wss:// is not served`,
		"ws://h:1/path":                         `entry 1 "ws://h:1/path": a listener takes no path or query, got "/path" (apps may use any path; TETHER_FORWARD_PATH`,
		"ws://h:1?x=1":                          `entry 1 "ws://h:1?x=1": a listener takes no path or query, got "?x=1"`,
		"tcp://h:1/lines":                       `entry 1 "tcp://h:1/lines": a listener takes no path or query, got "/lines"`,
		"tcp://127.0.0.1":                       `entry 1 "tcp://127.0.0.1": invalid address`,
		"unix://tether.sock":                    `entry 1 "unix://tether.sock": socket path "tether.sock" is not absolute: write unix:// then an absolute path, as in unix:///run/tether.sock (three slashes)`,
		"unix://":                               `entry 1 "unix://": missing socket path`,
		"unix:///run/":                          `entry 1 "unix:///run/": socket path "/run/" names a directory`,
		"unix:///run/t.sock?mode=0660":          `entry 1 "unix:///run/t.sock?mode=0660": a unix:// entry is a path only`,
		"127.0.0.1:1,tcp://x":                   `entry 2 "tcp://x": invalid address`,
		"ftp://a:1,127.0.0.1:2,unix://x":        `entry 1 "ftp://a:1": unknown scheme "ftp": use host:port, ws://host:port, tcp://host:port, unix:///path or sse://host:port/path; entry 3 "unix://x": socket path "x" is not absolute`,
		"sse://127.0.0.1/events":                `entry 1 "sse://127.0.0.1/events": invalid address`,
		"sse://h:1/events?x=1":                  `entry 1 "sse://h:1/events?x=1": an sse:// entry takes a path, no query or fragment, got "?x=1"`,
		"sse://h:1#top":                         `an sse:// entry takes a path, no query or fragment, got "#top"`,
		"sse://h:1/my%20events":                 `path "/my%20events" holds '%': write the path with letters, digits, / and -._~!$&'()*+,;=:@ only, without percent-encoding`,
		"sse://h:1/my events":                   `path "/my events" holds ' '`,
		"sse://h:1/évents":                      `path "/évents" holds 'é'`,
		"sse://h:1/a/../events":                 `path "/a/../events" has a dot segment`,
		"sse://h:1/./events":                    `has a dot segment`,
		"sse://h:1//events":                     `path "//events" has an empty segment (//)`,
		"sse://h:1/a//b":                        `has an empty segment (//)`,
		"127.0.0.1:8080,sse://127.0.0.1:8080/e": `entries 1 "ws://127.0.0.1:8080" and 2 "sse://127.0.0.1:8080/e" listen on the same address`,
		"sse://127.0.0.1:1/a,sse://127.0.0.1:1/b": `entries 1 "sse://127.0.0.1:1/a" and 2 "sse://127.0.0.1:1/b" listen on the same address`,
		"127.0.0.1:8080,ws://127.0.0.1:8080/":     `entry 2 "ws://127.0.0.1:8080" repeats entry 1 "ws://127.0.0.1:8080"`,
		"unix:///run/a.sock,unix:///run//a.sock":  `entry 2 "unix:///run/a.sock" repeats entry 1`,
		"127.0.0.1:8080,tcp://127.0.0.1:8080":     `entries 1 "ws://127.0.0.1:8080" and 2 "tcp://127.0.0.1:8080" listen on the same address`,
		"0.0.0.0:8080,tcp://127.0.0.1:8080":       `entries 1 "ws://0.0.0.0:8080" and 2 "tcp://127.0.0.1:8080" listen on the same address`,
		"tcp://[::1]:7000,:7000":                  `entries 1 "tcp://[::1]:7000" and 2 "ws://:7000" listen on the same address`,
		"LOCALHOST:80,tcp://localhost:080":        `listen on the same address`,
	}
	for in, want := range tests {
		var l listenList
		err := l.UnmarshalText([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalText(%q) = %q, want an error", in, l.String())
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalText(%q) = %q, want it to contain %q", in, err, want)
		}
	}
}

// LoadConfig reports a bad TETHER_LISTEN as one problem naming the variable.
func TestListenProblem(t *testing.T) {
	lines := loadErrLines(t, withURL(map[string]string{"TETHER_LISTEN": "127.0.0.1:8080,unix://relative.sock"}))
	want := `TETHER_LISTEN: entry 2 "unix://relative.sock": socket path "relative.sock" is not absolute`
	if len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("problems %q, want one starting with %q", lines, want)
	}
}

func TestListenValidateForSystem(t *testing.T) {
	long := "/" + strings.Repeat("d", 103) + ".sock" // 109 bytes
	mid := "/" + strings.Repeat("d", 100) + ".sock"  // 106 bytes: fits Linux only
	tests := []struct {
		goos, listen, want string // want "" means accepted
	}{
		{"linux", "unix:///run/t.sock,127.0.0.1:8080", ""},
		{"darwin", "unix:///run/t.sock", ""},
		{"windows", "127.0.0.1:8080,tcp://127.0.0.1:7000", ""},
		{"windows", "127.0.0.1:8080,unix:///run/t.sock", `TETHER_LISTEN: entry 2 "unix:///run/t.sock": unix:// listeners are not supported on Windows builds of tether; use ws:// or tcp://`},
		{"linux", "unix://" + mid, ""},
		{"darwin", "unix://" + mid, fmt.Sprintf(`TETHER_LISTEN: entry 1 "unix://%s": socket path is 106 bytes, longer than the 103 a unix socket address holds on darwin`, mid)},
		{"linux", "unix://" + long, "socket path is 109 bytes, longer than the 107 a unix socket address holds on linux"},
	}
	for _, tt := range tests {
		var l listenList
		if err := l.UnmarshalText([]byte(tt.listen)); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", tt.listen, err)
		}
		err := l.validateFor(tt.goos)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %q: %v, want accepted", tt.goos, tt.listen, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %q: %v, want an error containing %q", tt.goos, tt.listen, err, tt.want)
		}
	}
	if err := (listenList{}).validateFor("linux"); err == nil || !strings.Contains(err.Error(), "TETHER_LISTEN: must not be empty") {
		t.Errorf("empty list: %v", err)
	}
}

func TestListenAllowedHosts(t *testing.T) {
	tests := map[string][]string{
		"127.0.0.1:8080":  nil,
		"0.0.0.0:8080":    nil,
		"[::]:8080":       nil,
		":8080":           nil,
		"10.0.0.5:8080":   nil, // connections to it arrive on that address: accepted as such
		"tether-box:8080": {"tether-box"},
		"localhost:8080":  {"localhost"},
		// Every ws and sse entry counts; tcp entries have no handshake, unix no host.
		"tether-box:8080,tcp://other-box:7000,unix:///run/t.sock,ws://second-name:8081,tether-box:8082": {"tether-box", "second-name"},
		"sse://events-box:8081/events,tether-box:8080":                                                  {"events-box", "tether-box"},
	}
	for in, want := range tests {
		var l listenList
		if err := l.UnmarshalText([]byte(in)); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", in, err)
		}
		if got := l.allowedHosts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: allowedHosts() = %q, want %q", in, got, want)
		}
	}
}

func TestSocketMode(t *testing.T) {
	accepted := map[string]socketMode{"0600": 0o600, "600": 0o600, "0o660": 0o660, " 0777 ": 0o777, "0200": 0o200, "002": 0o002}
	for in, want := range accepted {
		var m socketMode
		if err := m.UnmarshalText([]byte(in)); err != nil || m != want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", in, m, err, want)
		}
	}
	refused := map[string]string{
		"":      "invalid file mode",
		"rw":    "invalid file mode",
		"0800":  "invalid file mode",
		"-600":  "invalid file mode",
		"0x1ff": "invalid file mode",
		"4755":  "bits beyond 0777",
		"0444":  "lets no one connect",
		"0":     "lets no one connect",
	}
	for in, want := range refused {
		var m socketMode
		if err := m.UnmarshalText([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want an error containing %q", in, m, err, want)
		}
	}
	if s := socketMode(0o660).String(); s != "0660" {
		t.Errorf("String() = %q, want 0660", s)
	}
	// The constant the start-up warning compares with is the tag's default.
	cfg, err := LoadConfig(withURL(nil))
	if err != nil || cfg.UnixSocketMode != defaultSocketMode {
		t.Errorf("default mode = %v (%v), want defaultSocketMode %v", cfg.UnixSocketMode, err, defaultSocketMode)
	}
}

// The transport variables parse, and bad values are refused naming them.
func TestTransportVariables(t *testing.T) {
	needUnixSockets(t)
	cfg, err := LoadConfig(withURL(map[string]string{
		"TETHER_LISTEN":           "tcp://127.0.0.1:7000,unix:///run/t.sock",
		"TETHER_TCP_BINARY":       "drop",
		"TETHER_TCP_NEWLINE":      "close",
		"TETHER_UNIX_SOCKET_MODE": "0660",
		"TETHER_FORWARD_PATH":     "true",
	}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if cfg.TCPBinary != proxy.BinaryDrop || cfg.TCPNewline != proxy.NewlineClose || cfg.UnixSocketMode != 0o660 || !cfg.ForwardPath {
		t.Errorf("TCPBinary=%v TCPNewline=%v UnixSocketMode=%v ForwardPath=%v", cfg.TCPBinary, cfg.TCPNewline, cfg.UnixSocketMode, cfg.ForwardPath)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if opts.TCPBinary != proxy.BinaryDrop || opts.TCPNewline != proxy.NewlineClose || !opts.ForwardPath {
		t.Errorf("proxy.Options: TCPBinary=%v TCPNewline=%v ForwardPath=%v", opts.TCPBinary, opts.TCPNewline, opts.ForwardPath)
	}

	lines := loadErrLines(t, withURL(map[string]string{
		"TETHER_TCP_BINARY":       "hex",
		"TETHER_TCP_NEWLINE":      "escape",
		"TETHER_UNIX_SOCKET_MODE": "rw-rw----",
		"TETHER_FORWARD_PATH":     "yes please",
	}))
	for _, name := range []string{"TETHER_TCP_BINARY: ", "TETHER_TCP_NEWLINE: ", "TETHER_UNIX_SOCKET_MODE: invalid file mode", "TETHER_FORWARD_PATH: "} {
		if !containsPrefix(lines, name) {
			t.Errorf("problems %q lack one starting with %q", lines, name)
		}
	}
	if len(lines) != 4 {
		t.Errorf("got %d problems, want 4: %q", len(lines), lines)
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// Settings no listener uses are named for the start-up warning; the
// defaults, and settings some listener uses, are not.
func TestIneffectiveSettings(t *testing.T) {
	needUnixSockets(t)
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{}, nil},
		{map[string]string{"TETHER_TCP_BINARY": "base64", "TETHER_TCP_NEWLINE": "space", "TETHER_UNIX_SOCKET_MODE": "600"}, nil},
		{
			map[string]string{"TETHER_TCP_BINARY": "drop", "TETHER_TCP_NEWLINE": "close", "TETHER_UNIX_SOCKET_MODE": "0660"},
			[]string{"TETHER_TCP_BINARY", "TETHER_TCP_NEWLINE", "TETHER_UNIX_SOCKET_MODE"},
		},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1,unix:///t.sock", "TETHER_TCP_BINARY": "drop", "TETHER_UNIX_SOCKET_MODE": "0660"}, nil},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1", "TETHER_FORWARD_PATH": "true"}, []string{"TETHER_FORWARD_PATH"}},
		{map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:1,unix:///t.sock", "TETHER_FORWARD_PATH": "true"}, nil},
		{map[string]string{"TETHER_FORWARD_PATH": "true"}, nil},
	}
	for _, tt := range tests {
		cfg, err := LoadConfig(withURL(tt.env))
		if err != nil {
			t.Fatalf("LoadConfig(%v): %v", tt.env, err)
		}
		if got := ineffectiveSettings(cfg); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%v: ineffectiveSettings = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// An sse:// entry is bound to a listener that carries its path, which is
// what the proxy serves; the other kinds get plain listeners.
func TestBindSSECarriesPath(t *testing.T) {
	var l listenList
	if err := l.UnmarshalText([]byte("sse://127.0.0.1:0/events,127.0.0.1:0,sse://127.0.0.1:0")); err != nil {
		t.Fatal(err)
	}
	lns, err := openListeners(l, defaultSocketMode, zap.NewNop())
	if err != nil {
		t.Fatalf("openListeners: %v", err)
	}
	defer closeListeners(lns)
	for i, want := range []string{"/events", "", "/"} {
		sl, ok := lns[i].ln.(*proxy.SSEListener)
		switch {
		case want == "" && ok:
			t.Errorf("entry %d (%s) bound as an sse listener", i+1, lns[i].spec)
		case want != "" && (!ok || sl.Path != want):
			t.Errorf("entry %d (%s) bound as %T, want an *proxy.SSEListener with path %q", i+1, lns[i].spec, lns[i].ln, want)
		}
	}
}

// An sse:// entry end to end: tether announces it, an EventSource request
// at its path gets the upstream's messages as events, the session is
// counted under listener="sse", and the drain ends the stream with a
// tether-close event.
func TestSSEListenerEndToEnd(t *testing.T) {
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL": up.URL(),
		"TETHER_LISTEN":       "sse://127.0.0.1:0/events",
	})
	listening := r.logs.FilterMessage("listening").All()
	if len(listening) != 1 || listening[0].ContextMap()["kind"] != "sse" || listening[0].ContextMap()["entry"] != "sse://127.0.0.1:0/events" {
		t.Fatalf("listening log entries %v, want one for the sse entry", listening)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(r.appURL, "ws://"), "/")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/events")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answered %d %q, want an event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := sse.NewReader(resp.Body, sse.Options{})
	next := func() sse.Item {
		t.Helper()
		item, err := rd.Next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		return item
	}
	if item := next(); item.Kind != sse.KindID || !strings.HasSuffix(item.LastEventID, "-0") {
		t.Fatalf("stream starts with %+v, want the session's id block", item)
	}
	if item := next(); item.Kind != sse.KindEvent || item.Event.Data != `{"t":"welcome"}` || !strings.HasSuffix(item.Event.ID, "-1") {
		t.Fatalf("got %+v, want the upstream's welcome as event 1", item)
	}
	awaitMetric(t, r.adminURL, "tether_sessions", map[string]string{"listener": "sse"}, 1)
	if _, err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if item := next(); item.Kind != sse.KindEvent || item.Event.Type != "tether-close" || !strings.Contains(item.Event.Data, `"code":1001`) {
		t.Fatalf("got %+v after the drain began, want tether-close 1001", item)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after tether-close: %v, want the end of the stream", err)
	}
}
