package proxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// handshakeTimeout is HandshakeTimeout in the slowloris tests: long enough
// for a request written at once under -race, short enough to wait out.
const handshakeTimeout = 400 * time.Millisecond

// A client that connects and sends nothing, or trickles its request a byte at
// a time (slowloris), is cut off HandshakeTimeout after it connected: the
// trickle does not extend the deadline. Neither reaches the upstream.
func TestSlowHandshakeCutOff(t *testing.T) {
	tests := []struct {
		name    string
		trickle bool
	}{
		{"silent", false},
		{"trickle", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{quiet: true})
			m := newCounts()
			e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
				o.Metrics = m
				o.HandshakeTimeout = handshakeTimeout
			})
			// The clock starts before the dial: tether's deadline starts
			// when it accepts, which can come before Dial returns here.
			start := time.Now()
			nc, err := net.Dial("tcp", e.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if tt.trickle {
				trickle(t, nc, "GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "+strings.Repeat("a", 1<<10), handshakeTimeout/20)
			}
			_ = nc.SetReadDeadline(time.Now().Add(testTimeout))
			n, err := nc.Read(make([]byte, 1))
			elapsed := time.Since(start)
			if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read %d bytes, %v: want the connection closed by tether", n, err)
			}
			within(t, "connection closed", elapsed, handshakeTimeout, handshakeTimeout+slack)
			m.await(t, "rejected "+labels.RejectTimeout, 1)
			if n := up.srv.Handshakes(); n != 0 {
				t.Errorf("upstream saw %d handshakes, want 0", n)
			}
		})
	}
}

// trickle writes s one byte every interval on its own goroutine until the
// bytes run out or a write fails (tether closed the connection). Cleanup
// waits for it.
func trickle(t *testing.T, nc net.Conn, s string, interval time.Duration) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := range len(s) {
			if _, err := nc.Write([]byte{s[i]}); err != nil {
				return
			}
			<-tick.C
		}
	}()
	t.Cleanup(func() {
		_ = nc.Close()
		wg.Wait()
	})
}

// A handshake request over 16 KiB is answered 431 and never reaches the
// upstream; one just under the limit is accepted.
func TestOversizedHandshake(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })

	a := rawHandshake(t, e, e.addr(), "Cookie: "+strings.Repeat("c", 17<<10)+"\r\n")
	if a.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("17 KiB request: answered %d %q, want 431", a.status, a.body)
	}
	m.await(t, "rejected "+labels.RejectHeadersTooLarge, 1)
	if n := up.srv.Handshakes(); n != 0 {
		t.Fatalf("upstream saw %d handshakes, want 0", n)
	}
	// The rest of the request (about 240 bytes) fits.
	if a := rawHandshake(t, e, e.addr(), "Cookie: "+strings.Repeat("c", 16<<10-300)+"\r\n"); a.status != http.StatusSwitchingProtocols {
		t.Fatalf("request just under 16 KiB: answered %d %q, want 101", a.status, a.body)
	}
}

// A refusal decided on an early header leaves the rest of a large request
// unread (browsers send kilobytes of cookies to localhost). Closing a socket
// with unread bytes makes the kernel reset the connection, and some systems
// then drop the answer the client has not read yet; so tether half-closes and
// drains instead: the client reads the 403, then a clean end of stream.
func TestRefusalEndsCleanlyBehindLargeRequest(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true})
	e := newTether(t, up.srv.URL(), nil)
	nc, err := net.Dial("tcp", e.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	req := "GET / HTTP/1.1\r\nHost: " + e.addr() + "\r\nOrigin: https://evil.example\r\n" +
		"Cookie: " + strings.Repeat("c", 12<<10) + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("answered %d, want 403", resp.StatusCode)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the answer: read %d bytes, %v; want a clean end of stream (io.EOF), not a reset", n, err)
	}
}

// An upstream message over the limit closes the app with 1009 and a reason
// naming the upstream and the variable; one at the limit passes. 1009 is
// permanent by default: tether does not reconnect to be sent it again.
func TestOversizedUpstreamMessage(t *testing.T) {
	const limit = 1 << 10
	up := newUpstream(t, upstreamConfig{onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if c.Send(strings.Repeat("a", limit)) == nil {
			_ = c.Send(strings.Repeat("b", limit+1))
		}
		<-c.Done()
	}})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.Upstream.MaxMessageBytes = limit })
	a := dialApp(t, e.url, appOptions{})
	a.expectText(t, strings.Repeat("a", limit))
	a.expectClosed(t, testTimeout, ws.StatusMessageTooBig, "upstream message exceeds TETHER_MAX_MESSAGE_BYTES")
	e.expectSessions(t, 0)
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1", n)
	}
}
