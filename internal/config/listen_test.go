package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

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
		var l ListenList
		if err := l.UnmarshalText([]byte(tt.in)); err != nil {
			t.Errorf("UnmarshalText(%q): %v", tt.in, err)
			continue
		}
		if l.String() != tt.want {
			t.Errorf("UnmarshalText(%q) = %q, want %q", tt.in, l.String(), tt.want)
		}
		for i, ln := range l {
			if i < len(tt.loopback) && ln.IsLoopback() != tt.loopback[i] {
				t.Errorf("%q entry %d: loopback = %v, want %v", tt.in, i+1, ln.IsLoopback(), tt.loopback[i])
			}
		}
	}
}

func TestListenEntryPositions(t *testing.T) {
	var l ListenList
	if err := l.UnmarshalText([]byte("127.0.0.1:1,,tcp://127.0.0.1:2")); err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Pos != 1 || l[1].Pos != 3 || l[1].Kind != proxy.ListenerTCP || l[1].Addr != "127.0.0.1:2" {
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
		var l ListenList
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

// Load reports a bad TETHER_LISTEN as one problem naming the variable.
func TestListenProblem(t *testing.T) {
	lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_LISTEN": "127.0.0.1:8080,unix://relative.sock"}))
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
		var l ListenList
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
	if err := (ListenList{}).validateFor("linux"); err == nil || !strings.Contains(err.Error(), "TETHER_LISTEN: must not be empty") {
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
		var l ListenList
		if err := l.UnmarshalText([]byte(in)); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", in, err)
		}
		if got := l.AllowedHosts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: AllowedHosts() = %q, want %q", in, got, want)
		}
	}
}

func TestSocketMode(t *testing.T) {
	accepted := map[string]SocketMode{"0600": 0o600, "600": 0o600, "0o660": 0o660, " 0777 ": 0o777, "0200": 0o200, "002": 0o002}
	for in, want := range accepted {
		var m SocketMode
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
		var m SocketMode
		if err := m.UnmarshalText([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want an error containing %q", in, m, err, want)
		}
	}
	if s := SocketMode(0o660).String(); s != "0660" {
		t.Errorf("String() = %q, want 0660", s)
	}
	// The constant the start-up warning compares with is the tag's default.
	cfg, err := Load(configtest.WithURL(nil))
	if err != nil || cfg.UnixSocketMode != DefaultSocketMode {
		t.Errorf("default mode = %v (%v), want defaultSocketMode %v", cfg.UnixSocketMode, err, DefaultSocketMode)
	}
}

// Bad transport variables are refused together, each naming itself.
func TestTransportVariablesRefused(t *testing.T) {
	lines := loadErrLines(t, configtest.WithURL(map[string]string{
		"TETHER_TCP_BINARY":       "hex",
		"TETHER_TCP_NEWLINE":      "escape",
		"TETHER_UNIX_SOCKET_MODE": "rw-rw----",
		"TETHER_FORWARD_PATH":     "yes please",
	}))
	for _, name := range []string{"TETHER_TCP_BINARY: ", "TETHER_TCP_NEWLINE: ", "TETHER_UNIX_SOCKET_MODE: invalid file mode", "TETHER_FORWARD_PATH: "} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, name) }) {
			t.Errorf("problems %q lack one starting with %q", lines, name)
		}
	}
	if len(lines) != 4 {
		t.Errorf("got %d problems, want 4: %q", len(lines), lines)
	}
}
