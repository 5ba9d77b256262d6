package browser

import (
	"net"
	"strings"
	"testing"
)

func mustGuard(t testing.TB, origins, hosts []string) *Guard {
	t.Helper()
	g, err := NewGuard(origins, hosts)
	if err != nil {
		t.Fatalf("NewGuard: %v", err)
	}
	return g
}

// The Host rule: loopback names and addresses, the address the app reached
// and the listen host pass, whatever the port; every other name is refused.
func TestCheckHost(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	lan := &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 8080}
	tests := []struct {
		host  string
		local net.Addr
		hosts []string
		ok    bool
	}{
		{"127.0.0.1:8080", loopback, nil, true},
		{"127.0.0.1", loopback, nil, true},
		{"127.1.2.3:9999", loopback, nil, true}, // all of 127.0.0.0/8, any port
		{"localhost:8080", loopback, nil, true},
		{"LOCALHOST:8080", loopback, nil, true},
		{"localhost.:8080", loopback, nil, true},
		{"app.localhost:8080", loopback, nil, true},
		{"[::1]:8080", loopback, nil, true},
		{"[::1]", loopback, nil, true},
		{"::1", loopback, nil, true},
		{"[::ffff:127.0.0.1]:8080", loopback, nil, true},
		{"192.168.1.5:8080", lan, nil, true}, // the address the app connected to
		{"tether-box:8080", lan, []string{"tether-box"}, true},
		{"Tether-Box.:8080", lan, []string{"tether-box"}, true},

		{"evil.example:8080", loopback, nil, false}, // DNS rebinding
		{"localhost.evil.example:8080", loopback, nil, false},
		{"evillocalhost:8080", loopback, nil, false},
		{".localhost:8080", loopback, nil, false},
		{"192.168.1.5:8080", loopback, nil, false}, // not the address the app reached
		{"10.0.0.1:8080", lan, nil, false},
		{"[fe80::1%25eth0]:8080", loopback, nil, false},
		{"", loopback, nil, false},
		{"tether-box:8080", lan, nil, false},
	}
	for _, tt := range tests {
		g := mustGuard(t, nil, tt.hosts)
		err := g.CheckHost([]byte(tt.host), tt.local)
		if (err == nil) != tt.ok {
			t.Errorf("CheckHost(%q, local %v, hosts %q) = %v, want ok %v", tt.host, tt.local, tt.hosts, err, tt.ok)
		}
		if err != nil {
			expectRefusal(t, err, "DNS rebinding")
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	tests := []struct {
		allowed []string
		origin  string
		ok      bool
	}{
		{[]string{"http://localhost:3000"}, "http://localhost:3000", true},
		{[]string{"http://localhost:3000"}, "HTTP://LocalHost:3000", true},
		{[]string{"https://app.example"}, "https://app.example:443", true},
		{[]string{"https://app.example:443"}, "https://app.example", true},
		{[]string{"http://[::1]:3000"}, "http://[0:0::1]:3000", true},
		{[]string{"*"}, "http://evil.example", true},
		{[]string{"*"}, "null", true},

		{nil, "http://localhost:3000", false}, // a page on localhost is foreign until listed
		{[]string{"http://localhost:3000"}, "http://localhost:3001", false},
		{[]string{"http://localhost:3000"}, "https://localhost:3000", false},
		{[]string{"http://localhost:3000"}, "http://127.0.0.1:3000", false},
		{[]string{"http://localhost:3000"}, "null", false}, // file:// pages, sandboxed frames
		{[]string{"http://localhost:3000"}, "http://localhost:3000/", false},
		{[]string{"http://localhost:3000"}, "", false},
	}
	for _, tt := range tests {
		g := mustGuard(t, tt.allowed, nil)
		err := g.CheckOrigin([]byte(tt.origin))
		if (err == nil) != tt.ok {
			t.Errorf("allowed %q: CheckOrigin(%q) = %v, want ok %v", tt.allowed, tt.origin, err, tt.ok)
		}
		if err != nil {
			expectRefusal(t, err, "TETHER_ALLOWED_ORIGINS")
		}
	}
}

// expectRefusal checks that a refusal says what to do about it on one line
// (the proxy answers it with 403: proxy's TestOriginCheck and TestHostCheck).
func expectRefusal(t *testing.T, err error, mention string) {
	t.Helper()
	if msg := err.Error(); !strings.Contains(msg, mention) || strings.ContainsAny(msg, "\r\n") {
		t.Errorf("refusal reason %q: want one line naming %s", msg, mention)
	}
}

// The checks run for every handshake inside gobwas' header callbacks: an
// accepted Host name or Origin costs no allocation, an IP literal one (the
// string netip parses).
func TestBrowserChecksDoNotAllocate(t *testing.T) {
	g := mustGuard(t, []string{"http://localhost:3000", "https://app.example"}, []string{"tether-box"})
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	hosts := []struct {
		host   []byte
		allocs float64
	}{
		{[]byte("localhost:8080"), 0},
		{[]byte("tether-box:8080"), 0},
		{[]byte("127.0.0.1:8080"), 1},
		{[]byte("[::1]:8080"), 1},
	}
	for _, h := range hosts {
		if n := testing.AllocsPerRun(100, func() { _ = g.CheckHost(h.host, local) }); n > h.allocs {
			t.Errorf("host %s: %v allocations per check, want ≤ %v", h.host, n, h.allocs)
		}
	}
	origin := []byte("http://localhost:3000")
	if n := testing.AllocsPerRun(100, func() { _ = g.CheckOrigin(origin) }); n != 0 {
		t.Errorf("origin: %v allocations per check, want 0", n)
	}
}

func TestNewGuardRefusesBadOrigins(t *testing.T) {
	if _, err := NewGuard([]string{"http://localhost:3000/app"}, nil); err == nil {
		t.Error("an origin with a path was accepted")
	}
}

func TestNormalizeOrigin(t *testing.T) {
	tests := []struct {
		in, want string // want "" means an error
	}{
		{"http://localhost:3000", "http://localhost:3000"},
		{"HTTP://LocalHost:3000", "http://localhost:3000"},
		{"http://localhost:80", "http://localhost"},
		{"https://app.example:443", "https://app.example"},
		{"wss://app.example:443", "wss://app.example"},
		{"https://app.example:8443", "https://app.example:8443"},
		{"http://localhost:03000", "http://localhost:3000"},
		{"http://[::1]:3000", "http://[::1]:3000"},
		{"http://[0:0:0:0:0:0:0:1]", "http://[::1]"},
		{"http://127.0.0.1:5173", "http://127.0.0.1:5173"},
		{"chrome-extension://abcdefghijklmnop", "chrome-extension://abcdefghijklmnop"},
		{"tauri://localhost", "tauri://localhost"},
		{"http://xn--bcher-kva.example", "http://xn--bcher-kva.example"},

		{"null", ""},
		{"*", ""},
		{"localhost:3000", ""},
		{"http://", ""},
		{"http://localhost:3000/", ""},
		{"http://localhost:3000/app", ""},
		{"http://localhost?x=1", ""},
		{"http://localhost#x", ""},
		{"http://user:pw@localhost", ""},
		{"http://localhost:", ""},
		{"http://localhost:0", ""},
		{"http://localhost:65536", ""},
		{"http://localhost:+80", ""},
		{"http://local host", ""},
		{"http://[::1", ""},
		{"http://[127.0.0.1]", ""},
		{"http://[::1]x", ""},
		{"1http://localhost", ""},
		{"ht tp://localhost", ""},
		{"http://bücher.example", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeOrigin(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", tt.in, got)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
