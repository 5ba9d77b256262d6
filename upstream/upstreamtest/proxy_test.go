package upstreamtest

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// echoThroughProxy starts an echo server behind a fault proxy.
func echoThroughProxy(t *testing.T, opts Options) (*Server, *FaultProxy) {
	t.Helper()
	srv := newServer(t, opts)
	return srv, newProxy(t, srv.Addr())
}

func (c *client) roundTrip(text string) {
	c.t.Helper()
	c.send(ws.OpText, []byte(text))
	if op, data := c.message(); op != ws.OpText || string(data) != text {
		c.t.Fatalf("echo = %v %q, want %q", op, data, text)
	}
}

func TestProxyForwards(t *testing.T) {
	_, p := echoThroughProxy(t, Options{})
	if !strings.HasPrefix(p.URL(), "ws://127.0.0.1:") || !strings.HasSuffix(p.URL(), "/") {
		t.Errorf("URL() = %q", p.URL())
	}
	cl := dial(t, p.URL(), ws.Dialer{})
	cl.roundTrip("through the proxy")
	if p.Conns() != 1 {
		t.Errorf("Conns() = %d, want 1", p.Conns())
	}
}

func TestProxyBlackhole(t *testing.T) {
	srv, p := echoThroughProxy(t, Options{})
	cl := dial(t, p.URL(), ws.Dialer{})
	sc := nextConn(t, srv)
	cl.roundTrip("before")
	p.Blackhole(true)
	cl.send(ws.OpPing, []byte("alive?"))
	cl.send(ws.OpText, []byte("held"))
	cl.expectSilence()
	if sc.Pings() != 0 {
		t.Errorf("server saw %d pings through a blackhole", sc.Pings())
	}
	if p.Conns() != 1 {
		t.Errorf("Conns() = %d during blackhole, want 1 (TCP stays open)", p.Conns())
	}
	p.Blackhole(false)
	// Held bytes are delivered, not lost: the pong, then the echo.
	if f := cl.mustFrame(); f.Header.OpCode != ws.OpPong || string(f.Payload) != "alive?" {
		t.Fatalf("after resume got %v %q, want the pong", f.Header.OpCode, f.Payload)
	}
	if _, data := cl.message(); string(data) != "held" {
		t.Fatalf("after resume got %q, want the held message", data)
	}
	cl.roundTrip("after")
}

func TestProxyBlackholeNewConnection(t *testing.T) {
	srv, p := echoThroughProxy(t, Options{})
	p.Blackhole(true)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// TCP connects (the kernel accepts), but the handshake goes nowhere.
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(quiet))
	var ne net.Error
	if _, err := conn.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read through blackhole = %v, want timeout", err)
	}
	if srv.Handshakes() != 0 {
		t.Errorf("Handshakes() = %d, want 0", srv.Handshakes())
	}
}

func TestProxyResetAll(t *testing.T) {
	srv, p := echoThroughProxy(t, Options{})
	clients := []*client{dial(t, p.URL(), ws.Dialer{}), dial(t, p.URL(), ws.Dialer{})}
	conns := []*Conn{nextConn(t, srv), nextConn(t, srv)}
	for _, cl := range clients {
		cl.roundTrip("up")
	}
	if p.Conns() != 2 {
		t.Fatalf("Conns() = %d, want 2", p.Conns())
	}
	p.ResetAll()
	if p.Conns() != 0 {
		t.Errorf("Conns() = %d after ResetAll, want 0", p.Conns())
	}
	for _, cl := range clients {
		cl.expectReset()
	}
	for _, sc := range conns {
		waitDone(t, sc)
	}
	cl := dial(t, p.URL(), ws.Dialer{})
	cl.roundTrip("new connections still work")
}

func TestProxyPropagatesServerEnd(t *testing.T) {
	tests := []struct {
		name   string
		end    func(*Conn) error
		expect func(*client)
	}{
		{"reset", (*Conn).Reset, (*client).expectReset},
		{"close", (*Conn).Close, (*client).expectEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p := echoThroughProxy(t, Options{OnConn: func(c *Conn) {
				if _, _, err := c.Read(c.Context()); err == nil {
					_ = tc.end(c)
				}
			}})
			cl := dial(t, p.URL(), ws.Dialer{})
			cl.send(ws.OpText, []byte("end it"))
			tc.expect(cl)
		})
	}
}

func TestProxySlice(t *testing.T) {
	big := strings.Repeat("0123456789", 500)
	srv, p := echoThroughProxy(t, Options{OnConn: func(c *Conn) {
		if c.Send(big) == nil && c.SendFragmented(big, 7) == nil {
			echo(c)
		}
	}})
	p.SetSlice(3)
	cl := dial(t, p.URL(), ws.Dialer{})
	for range 2 {
		if _, data := cl.message(); string(data) != big {
			t.Fatalf("sliced message: %d bytes, want %d", len(data), len(big))
		}
	}
	cl.roundTrip(big)
	if srv.Handshakes() != 1 {
		t.Errorf("Handshakes() = %d, want 1", srv.Handshakes())
	}
}

// TestForwardSlices checks the write pattern itself: net.Pipe hands each
// Write to exactly one Read, so the reads show the slices.
func TestForwardSlices(t *testing.T) {
	tests := []struct {
		slice int
		want  []int
	}{
		{0, []int{10}},
		{3, []int{3, 3, 3, 1}},
		{10, []int{10}},
		{64, []int{10}},
	}
	for _, tc := range tests {
		t.Run("", func(t *testing.T) {
			p := &FaultProxy{}
			p.SetSlice(tc.slice)
			l := &link{done: make(chan struct{})}
			src, dst := net.Pipe()
			defer src.Close()
			ok := make(chan bool, 1)
			go func() {
				defer dst.Close()
				ok <- p.forward(l, dst, []byte("0123456789"))
			}()
			var sizes []int
			var got []byte
			buf := make([]byte, 64)
			for {
				n, err := src.Read(buf)
				if err != nil {
					break
				}
				sizes = append(sizes, n)
				got = append(got, buf[:n]...)
			}
			if !<-ok || string(got) != "0123456789" || !equalInts(sizes, tc.want) {
				t.Errorf("slice %d: writes %v (%q), want %v", tc.slice, sizes, got, tc.want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestProxyRefuseNew(t *testing.T) {
	srv, p := echoThroughProxy(t, Options{})
	p.RefuseNew(true)
	if _, err := tryDial(t, p.URL(), ws.Dialer{}); err == nil {
		t.Fatal("dial through a refusing proxy succeeded")
	}
	if srv.Handshakes() != 0 {
		t.Errorf("Handshakes() = %d, want 0", srv.Handshakes())
	}
	p.RefuseNew(false)
	dial(t, p.URL(), ws.Dialer{}).roundTrip("accepted again")
}

func TestProxyLatency(t *testing.T) {
	const latency = 50 * time.Millisecond
	_, p := echoThroughProxy(t, Options{})
	cl := dial(t, p.URL(), ws.Dialer{})
	p.SetLatency(latency)
	start := time.Now()
	cl.roundTrip("slow")
	// The message and its echo are each delayed once.
	if rtt := time.Since(start); rtt < 2*latency {
		t.Errorf("round trip %v, want at least %v", rtt, 2*latency)
	}
	p.SetLatency(0)
	cl.roundTrip("fast again")
}

// TestProxyBandwidth: a 64 KiB message through a 256 KiB/s link takes at
// least a quarter second each way, and arrives whole.
func TestProxyBandwidth(t *testing.T) {
	const rate = 256 << 10
	_, p := echoThroughProxy(t, Options{})
	cl := dial(t, p.URL(), ws.Dialer{})
	p.SetBandwidth(rate)
	msg := strings.Repeat("b", 64<<10)
	start := time.Now()
	cl.roundTrip(msg)
	if rtt, least := time.Since(start), 2*time.Second*time.Duration(len(msg))/rate; rtt < least {
		t.Errorf("round trip of %d bytes %v, want at least %v at %d B/s", len(msg), rtt, least, rate)
	}
	p.SetBandwidth(0)
	cl.roundTrip("fast again")
}

func TestProxyCloseEndsEverything(t *testing.T) {
	_, p := echoThroughProxy(t, Options{})
	cl := dial(t, p.URL(), ws.Dialer{})
	p.Blackhole(true)
	cl.send(ws.OpText, []byte("stuck in the proxy"))
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := cl.frame(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client read after proxy Close = %v, want EOF or reset", err)
	}
	if p.Conns() != 0 {
		t.Errorf("Conns() = %d after Close", p.Conns())
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("proxy still accepts after Close")
	}
}
