package upstreamtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

func TestEchoAndHandshakeDetails(t *testing.T) {
	srv := newServer(t, Options{Subprotocols: []string{"b", "a"}})
	cl := dial(t, srv.URL()+"feed?x=1", ws.Dialer{
		Protocols: []string{"x", "a", "b"},
		Header:    ws.HandshakeHeaderHTTP(http.Header{"X-Test": {"1"}}),
	})
	if cl.hs.Protocol != "a" {
		t.Errorf("client protocol = %q, want first offered and supported %q", cl.hs.Protocol, "a")
	}
	sc := nextConn(t, srv)
	if sc.N() != 1 || sc.Protocol() != "a" || sc.Path() != "/feed?x=1" || sc.Header().Get("X-Test") != "1" {
		t.Errorf("conn: N=%d protocol=%q path=%q X-Test=%q", sc.N(), sc.Protocol(), sc.Path(), sc.Header().Get("X-Test"))
	}
	if !strings.HasPrefix(sc.Header().Get("Host"), "127.0.0.1:") {
		t.Errorf("Host header = %q", sc.Header().Get("Host"))
	}
	tests := []struct {
		name string
		op   ws.OpCode
		data []byte
	}{
		{"text", ws.OpText, []byte(`{"t":"sub"}`)},
		{"binary", ws.OpBinary, []byte{0, 1, 2, 255}},
		{"empty text", ws.OpText, []byte{}},
		{"large binary", ws.OpBinary, bytes.Repeat([]byte("z"), 200<<10)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl.send(tc.op, tc.data)
			op, data := cl.message()
			if op != tc.op || !bytes.Equal(data, tc.data) {
				t.Errorf("echo = %v %d bytes, want %v %d bytes", op, len(data), tc.op, len(tc.data))
			}
		})
	}
	if srv.Handshakes() != 1 {
		t.Errorf("Handshakes() = %d, want 1", srv.Handshakes())
	}
}

func TestHandshakeRefusal(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		check  string // response header the client must see
	}{
		{"503 with Retry-After", http.StatusServiceUnavailable, http.Header{"Retry-After": {"7"}}, "Retry-After"},
		{"429 with Retry-After", http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}, "Retry-After"},
		{"401 with challenge", http.StatusUnauthorized, http.Header{"Www-Authenticate": {"Bearer"}}, "Www-Authenticate"},
		{"404 bare", http.StatusNotFound, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan Handshake, 1)
			srv := newServer(t, Options{Handshake: func(h Handshake) (int, http.Header) {
				seen <- h
				return tc.status, tc.header
			}})
			var gotHeader http.Header
			_, err := tryDial(t, srv.URL()+"v1?a=b", ws.Dialer{
				Header: ws.HandshakeHeaderHTTP(http.Header{"Authorization": {"Bearer tok"}}),
				OnStatusError: func(status int, _ []byte, resp io.Reader) {
					if r, err := http.ReadResponse(bufio.NewReader(resp), nil); err == nil {
						gotHeader = r.Header
					}
				},
			})
			var se ws.StatusError
			if !errors.As(err, &se) || int(se) != tc.status {
				t.Fatalf("dial error = %v, want ws.StatusError %d", err, tc.status)
			}
			if tc.check != "" && gotHeader.Get(tc.check) != tc.header.Get(tc.check) {
				t.Errorf("response %s = %q, want %q", tc.check, gotHeader.Get(tc.check), tc.header.Get(tc.check))
			}
			h := <-seen
			if h.N != 1 || h.Path != "/v1?a=b" || h.Header.Get("Authorization") != "Bearer tok" {
				t.Errorf("Handshake = N %d path %q Authorization %q", h.N, h.Path, h.Header.Get("Authorization"))
			}
			if len(srv.Conns()) != 0 {
				t.Error("a refused handshake produced a Conn")
			}
		})
	}
}

func TestHandshakeNumbering(t *testing.T) {
	const refused = 2
	srv := newServer(t, Options{Handshake: func(h Handshake) (int, http.Header) {
		if h.N <= refused {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}})
	for i := range refused {
		if _, err := tryDial(t, srv.URL(), ws.Dialer{}); err == nil {
			t.Fatalf("dial %d succeeded, want refusal", i+1)
		}
	}
	dial(t, srv.URL(), ws.Dialer{})
	if sc := nextConn(t, srv); sc.N() != 1 {
		t.Errorf("first accepted conn N() = %d, want 1", sc.N())
	}
	if srv.Handshakes() != refused+1 {
		t.Errorf("Handshakes() = %d, want %d", srv.Handshakes(), refused+1)
	}
}

func TestGreetingSharesHandshakeSegment(t *testing.T) {
	const greeting = `{"t":"welcome","session":"S","seq":41}`
	srv := newServer(t, Options{Greeting: greeting})
	cl := dial(t, srv.URL(), ws.Dialer{})
	// The greeting was written with the 101 response, so Dial's reader must
	// already hold the whole frame: this is what a client that reads from
	// the raw conn after Dial would lose.
	if cl.br == nil || cl.br.Buffered() < 2+len(greeting) {
		t.Fatalf("greeting not buffered with the 101 response (br=%v)", cl.br)
	}
	f, err := ReadFrame(cl.br, 64<<20)
	if err != nil || f.Header.OpCode != ws.OpText || string(f.Payload) != greeting {
		t.Fatalf("greeting frame = %v %q, err %v", f.Header.OpCode, f.Payload, err)
	}
	cl.r = cl.conn // the buffered greeting has been consumed
	cl.send(ws.OpText, []byte("after"))
	if _, data := cl.message(); string(data) != "after" {
		t.Errorf("echo after greeting = %q", data)
	}
}

func TestPushFromOnConn(t *testing.T) {
	srv := newServer(t, Options{OnConn: func(c *Conn) {
		if c.Send("first") == nil && c.SendBinary([]byte{1, 2}) == nil {
			echo(c)
		}
	}})
	cl := dial(t, srv.URL(), ws.Dialer{})
	if op, data := cl.message(); op != ws.OpText || string(data) != "first" {
		t.Errorf("first message = %v %q", op, data)
	}
	if op, data := cl.message(); op != ws.OpBinary || !bytes.Equal(data, []byte{1, 2}) {
		t.Errorf("second message = %v %v", op, data)
	}
}

func TestSendFragmented(t *testing.T) {
	const text = "fragmented message, ü included"
	tests := []struct {
		parts, frames int
	}{
		{1, 1},
		{3, 3},
		{1000, len(text)},
	}
	for _, tc := range tests {
		t.Run("", func(t *testing.T) {
			srv := newServer(t, Options{OnConn: func(c *Conn) {
				for range 2 {
					if c.SendFragmented(text, tc.parts) != nil {
						return
					}
				}
				<-c.Done()
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			var got []byte
			for i := range tc.frames {
				f := cl.mustFrame()
				wantOp := ws.OpContinuation
				if i == 0 {
					wantOp = ws.OpText
				}
				if f.Header.OpCode != wantOp || f.Header.Fin != (i == tc.frames-1) {
					t.Fatalf("frame %d: op %v fin %v", i, f.Header.OpCode, f.Header.Fin)
				}
				got = append(got, f.Payload...)
			}
			if string(got) != text {
				t.Errorf("fragments joined = %q", got)
			}
			if op, data := cl.message(); op != ws.OpText || string(data) != text {
				t.Errorf("wsutil reassembled %v %q", op, data)
			}
		})
	}
}

func TestCloseWith(t *testing.T) {
	tests := []struct {
		code   int
		reason string
	}{
		{1012, "service restart"},
		{1013, "try again later"},
		{4001, "reauthenticate"},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			errc := make(chan error, 1)
			srv := newServer(t, Options{CloseWait: testTimeout, OnConn: func(c *Conn) {
				errc <- c.CloseWith(tc.code, tc.reason)
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			sc := nextConn(t, srv)
			f := cl.mustFrame()
			code, reason := ws.ParseCloseFrameData(f.Payload)
			if f.Header.OpCode != ws.OpClose || int(code) != tc.code || reason != tc.reason {
				t.Fatalf("got %v %d %q, want close %d %q", f.Header.OpCode, code, reason, tc.code, tc.reason)
			}
			start := time.Now()
			cl.sendClose(tc.code, "")
			// CloseWait is testTimeout: returning well before it shows the
			// echo, not the timer, ended the wait.
			if err := <-errc; err != nil || time.Since(start) >= testTimeout {
				t.Fatalf("CloseWith = %v after %v", err, time.Since(start))
			}
			cl.expectEOF()
			if got, _, ok := sc.ReceivedClose(); !ok || got != tc.code {
				t.Errorf("ReceivedClose = %d %v, want %d", got, ok, tc.code)
			}
		})
	}
}

func TestClientClose(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "echoed", true: "ignored"}[ignore], func(t *testing.T) {
			errc := make(chan error, 1)
			srv := newServer(t, Options{IgnoreClose: ignore, OnConn: func(c *Conn) {
				_, _, err := c.Read(c.Context())
				errc <- err
				<-c.Done()
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			sc := nextConn(t, srv)
			cl.sendClose(1000, "bye")
			var cf *CloseFrame
			if err := <-errc; !errors.As(err, &cf) || cf.Code != 1000 || cf.Reason != "bye" {
				t.Fatalf("Read error = %v, want *CloseFrame 1000 bye", err)
			}
			if code, reason, ok := sc.ReceivedClose(); !ok || code != 1000 || reason != "bye" {
				t.Errorf("ReceivedClose = %d %q %v", code, reason, ok)
			}
			if ignore {
				cl.expectSilence()
				_ = sc.Close()
				cl.expectEOF()
				return
			}
			f := cl.mustFrame()
			if code, _ := ws.ParseCloseFrameData(f.Payload); f.Header.OpCode != ws.OpClose || code != 1000 {
				t.Fatalf("echo = %v %d, want close 1000", f.Header.OpCode, code)
			}
			cl.expectEOF()
			waitDone(t, sc)
		})
	}
}

func TestResetAndClose(t *testing.T) {
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
			srv := newServer(t, Options{OnConn: func(c *Conn) {
				if _, _, err := c.Read(c.Context()); err == nil {
					_ = tc.end(c)
				}
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			cl.send(ws.OpText, []byte("end it"))
			tc.expect(cl)
		})
	}
}

func TestPings(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered", true: "ignored"}[ignore], func(t *testing.T) {
			srv := newServer(t, Options{OnConn: func(c *Conn) {
				c.IgnorePings(ignore)
				if c.Send("ready") == nil {
					echo(c)
				}
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			sc := nextConn(t, srv)
			if _, data := cl.message(); string(data) != "ready" {
				t.Fatalf("first message %q", data)
			}
			cl.send(ws.OpPing, []byte("p1"))
			cl.send(ws.OpText, []byte("marker"))
			// The server handles frames in order: a pong, if any, is written
			// before the marker's echo.
			pongs := 0
			for f := cl.mustFrame(); f.Header.OpCode != ws.OpText; f = cl.mustFrame() {
				if f.Header.OpCode == ws.OpPong && string(f.Payload) == "p1" {
					pongs++
				}
			}
			if want := map[bool]int{false: 1, true: 0}[ignore]; pongs != want {
				t.Errorf("pongs = %d, want %d", pongs, want)
			}
			if sc.Pings() != 1 {
				t.Errorf("Pings() = %d, want 1", sc.Pings())
			}
			if err := sc.Ping([]byte("srv")); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			if f := cl.mustFrame(); f.Header.OpCode != ws.OpPing || string(f.Payload) != "srv" {
				t.Fatalf("server ping = %v %q", f.Header.OpCode, f.Payload)
			}
			cl.send(ws.OpPong, []byte("srv"))
			cl.send(ws.OpText, []byte("marker2"))
			cl.message()
			if sc.Pongs() != 1 {
				t.Errorf("Pongs() = %d, want 1", sc.Pongs())
			}
		})
	}
}

func TestStall(t *testing.T) {
	srv := newServer(t, Options{})
	cl := dial(t, srv.URL(), ws.Dialer{})
	sc := nextConn(t, srv)
	cl.send(ws.OpText, []byte("before"))
	cl.message()
	sc.Stall()
	if err := sc.Send("x"); !errors.Is(err, ErrStalled) {
		t.Errorf("Send after Stall = %v, want ErrStalled", err)
	}
	cl.send(ws.OpPing, []byte("p"))
	cl.send(ws.OpText, []byte("during"))
	cl.expectSilence()
	select {
	case <-sc.Done():
		t.Fatal("stalled conn closed itself")
	default:
	}
	if sc.Pings() != 0 {
		t.Errorf("Pings() = %d after Stall, want 0 (nothing is read)", sc.Pings())
	}
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	if _, _, err := sc.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read while stalled = %v, want deadline exceeded", err)
	}
	_ = sc.Close()
	// The stalled server never read "during": its kernel answers the close
	// with RST rather than FIN.
	cl.expectReset()
}

func TestProtocolViolations(t *testing.T) {
	tests := []struct {
		name  string
		frame ws.Frame
		code  int
	}{
		{"unmasked", ws.NewTextFrame([]byte("hi")), 1002},
		{"too big", ws.MaskFrame(ws.NewBinaryFrame(make([]byte, 9))), 1009},
		{"invalid utf8", ws.MaskFrame(ws.NewTextFrame([]byte{0xff, 0xfe})), 1007},
		{"stray continuation", ws.MaskFrame(ws.NewFrame(ws.OpContinuation, true, []byte("x"))), 1002},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errc := make(chan error, 1)
			srv := newServer(t, Options{MaxMessageBytes: 8, OnConn: func(c *Conn) {
				_, _, err := c.Read(c.Context())
				errc <- err
			}})
			cl := dial(t, srv.URL(), ws.Dialer{})
			if err := ws.WriteFrame(cl.conn, tc.frame); err != nil {
				t.Fatal(err)
			}
			f := cl.mustFrame()
			if code, _ := ws.ParseCloseFrameData(f.Payload); f.Header.OpCode != ws.OpClose || int(code) != tc.code {
				t.Errorf("got %v %d, want close %d", f.Header.OpCode, code, tc.code)
			}
			var pe *ProtocolError
			if err := <-errc; !errors.As(err, &pe) || pe.Code != tc.code {
				t.Errorf("Read error = %v, want *ProtocolError %d", err, tc.code)
			}
		})
	}
}

func TestServerCloseEndsConnections(t *testing.T) {
	srv := newServer(t, Options{OnConn: func(c *Conn) { <-c.Context().Done() }})
	cl := dial(t, srv.URL(), ws.Dialer{})
	sc := nextConn(t, srv)
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitDone(t, sc)
	cl.expectEOF()
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := sc.Send("late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after close = %v, want ErrClosed", err)
	}
}

func TestTLS(t *testing.T) {
	cfg, caPEM, err := SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Options{TLS: cfg, Greeting: "hello over tls"})
	if !strings.HasPrefix(srv.URL(), "wss://127.0.0.1:") {
		t.Fatalf("URL() = %q", srv.URL())
	}
	if _, err := tryDial(t, srv.URL(), ws.Dialer{}); err == nil {
		t.Fatal("dial without trusting the self-signed CA succeeded")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM not parseable")
	}
	cl := dial(t, srv.URL(), ws.Dialer{TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if _, data := cl.message(); string(data) != "hello over tls" {
		t.Errorf("greeting = %q", data)
	}
	cl.send(ws.OpText, []byte("secure"))
	if _, data := cl.message(); string(data) != "secure" {
		t.Errorf("echo = %q", data)
	}
}

func TestAcceptWithHeaders(t *testing.T) {
	srv := newServer(t, Options{Handshake: func(Handshake) (int, http.Header) {
		return 0, http.Header{"X-Upstream": {"yes"}}
	}})
	var got string
	dial(t, srv.URL(), ws.Dialer{OnHeader: func(key, value []byte) error {
		if http.CanonicalHeaderKey(string(key)) == "X-Upstream" {
			got = string(value)
		}
		return nil
	}})
	if got != "yes" {
		t.Errorf("101 response X-Upstream = %q, want yes", got)
	}
}
