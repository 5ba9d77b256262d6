package handshake

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// A request is read up to MaxRequestBytes, then refused with ErrTooLarge;
// a short one ends with the app's EOF.
func TestReaderStopsAtMaxRequestBytes(t *testing.T) {
	n, err := io.Copy(io.Discard, NewReader(strings.NewReader(strings.Repeat("x", MaxRequestBytes+1))))
	if n != MaxRequestBytes || !errors.Is(err, ErrTooLarge) {
		t.Errorf("read %d bytes, %v; want %d, ErrTooLarge", n, err, MaxRequestBytes)
	}
	n, err = io.Copy(io.Discard, NewReader(strings.NewReader("GET / HTTP/1.1\r\n\r\n")))
	if n != 18 || err != nil {
		t.Errorf("a short request: %d bytes, %v; want 18 and EOF", n, err)
	}
}

// The 431 answer is a well-formed HTTP response whose body is as long as
// it says.
func TestTooLargeResponse(t *testing.T) {
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(TooLargeResponse)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || string(body) != tooLargeBody || !resp.Close {
		t.Errorf("%d %q (%v), close %v", resp.StatusCode, body, err, resp.Close)
	}
}

// A refusal carries its status and a reason on one line, cut to
// maxRefusalBody bytes at a character boundary.
func TestRefusal(t *testing.T) {
	long := "upstream said:\r\n" + strings.Repeat("é", maxRefusalBody)
	var rej *ws.ConnectionRejectedError
	if err := Refusal(http.StatusBadGateway, long); !errors.As(err, &rej) || rej.StatusCode() != http.StatusBadGateway {
		t.Fatalf("Refusal = %v, want a 502 rejection", err)
	}
	got := rej.Error()
	if strings.ContainsAny(got, "\r\n") || len(got) > maxRefusalBody || !utf8.ValidString(got) || !strings.HasPrefix(got, "upstream said:") {
		t.Errorf("reason %q (%d bytes): want one valid line of at most %d bytes", got, len(got), maxRefusalBody)
	}
	if got := OneLine("  short\n"); got != "short" {
		t.Errorf("OneLine = %q", got)
	}
}

// A refused app whose request bytes tether never read still gets the
// whole answer, then EOF: CloseRefused half-closes and drains instead of
// resetting the connection.
func TestCloseRefusedDeliversTheAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	app, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Write([]byte("GET / HTTP/1.1\r\nOrigin: https://evil.example\r\nX-More: headers tether never read\r\n")); err != nil {
		t.Fatal(err)
	}
	const answer = "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	if _, err := io.WriteString(nc, answer); err != nil {
		t.Fatal(err)
	}
	CloseRefused(nc) // drains for at most Linger: the app does not close first
	_ = nc.Close()
	got, err := io.ReadAll(app)
	if string(got) != answer || err != nil {
		t.Errorf("the app read %q, %v; want the answer and EOF", got, err)
	}
}
