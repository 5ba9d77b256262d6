package proxy_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// commands is an upstream script for tcp:// tests: "binary" is answered
// with a binary message holding a newline, "newline" with text holding
// CR LF, "echo X" with X.
func commands(_ *upstreamEnv, c *upstreamtest.Conn) {
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		cmd := string(data)
		switch {
		case cmd == "binary":
			err = c.SendBinary(binaryPayload)
		case cmd == "newline":
			err = c.Send("{\"a\":1,\r\n\"b\":2}")
		case strings.HasPrefix(cmd, "echo "):
			err = c.Send(strings.TrimPrefix(cmd, "echo "))
		}
		if err != nil {
			return
		}
	}
}

var binaryPayload = []byte{0, 1, '\n', 0xfe, 0xff}

// Binary upstream messages and text with line breaks reach a tcp:// app as
// TETHER_TCP_BINARY and TETHER_TCP_NEWLINE say: never as raw bytes that
// would split or corrupt the line stream. A drop is counted and the stream
// goes on; a close delivers what came before, then ends the socket, and the
// session closes its upstream with 1000.
func TestTCPPolicies(t *testing.T) {
	tests := []struct {
		name    string
		binary  proxy.BinaryPolicy
		newline proxy.NewlinePolicy
		command string
		want    []string // lines after "before", then "after" unless closed
		dropped string   // counted reason, "" for none
		closed  bool
	}{
		{"binary base64", proxy.BinaryBase64, proxy.NewlineSpace, "binary", []string{base64.StdEncoding.EncodeToString(binaryPayload)}, "", false},
		{"binary drop", proxy.BinaryDrop, proxy.NewlineSpace, "binary", nil, labels.DropBinary, false},
		{"binary close", proxy.BinaryClose, proxy.NewlineSpace, "binary", nil, labels.DropBinary, true},
		{"newline space", proxy.BinaryBase64, proxy.NewlineSpace, "newline", []string{`{"a":1,  "b":2}`}, "", false},
		{"newline drop", proxy.BinaryBase64, proxy.NewlineDrop, "newline", nil, labels.DropNewline, false},
		{"newline close", proxy.BinaryBase64, proxy.NewlineClose, "newline", nil, labels.DropNewline, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{onConn: commands})
			m := newCounts()
			e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) {
				o.Metrics = m
				o.TCPBinary, o.TCPNewline = tc.binary, tc.newline
			}, proxy.ListenerTCP)
			a := dialLines(t, e.addr[proxy.ListenerTCP])
			c := up.nextConn(t)
			a.send(t, "echo before\n"+tc.command+"\necho after\n")
			a.expectLine(t, "before")
			for _, w := range tc.want {
				a.expectLine(t, w)
			}
			delivered := 1 + len(tc.want)
			if tc.closed {
				a.expectEOF(t, testTimeout)
				expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
			} else {
				a.expectLine(t, "after")
				delivered++
				a.expectOpen(t)
			}
			if tc.dropped != "" {
				m.await(t, "app dropped "+tc.dropped, 1)
			}
			m.await(t, "message upstream_to_app tcp", delivered)
		})
	}
}

// A line over TETHER_MAX_MESSAGE_BYTES closes the tcp:// app: the lines
// before it are sent upstream, it and everything after are not, the app
// reads a clean EOF, and the drop is counted. A line of exactly the limit
// passes, "\r\n" and "\n" both end a line, empty lines are skipped.
func TestTCPOversizedLine(t *testing.T) {
	const limit = 64
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.MaxMessageBytes = limit
	}, proxy.ListenerTCP)
	a := dialLines(t, e.addr[proxy.ListenerTCP])
	c := up.nextConn(t)
	full := strings.Repeat("f", limit)
	a.send(t, "\r\nfirst\r\n\n"+full+"\n"+full+"\r\n")
	up.expectFromApp(t, c.N(), ws.OpText, "first")
	up.expectFromApp(t, c.N(), ws.OpText, full)
	up.expectFromApp(t, c.N(), ws.OpText, full)

	a.send(t, strings.Repeat("o", limit+1)+"\nafter\n")
	a.expectEOF(t, testTimeout)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	up.expectNothingFromApp(t)
	m.await(t, "app dropped "+labels.DropTooLarge, 1)
	m.await(t, "message app_to_upstream tcp", 3)
	m.await(t, "session ended tcp", 1)
}

// A line that is not UTF-8 cannot be a text message: the app is closed and
// the line is not sent.
func TestTCPInvalidUTF8(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m }, proxy.ListenerTCP)
	a := dialLines(t, e.addr[proxy.ListenerTCP])
	c := up.nextConn(t)
	a.send(t, "café\n")
	up.expectFromApp(t, c.N(), ws.OpText, "café")
	a.send(t, "\xc3\x28\nafter\n")
	a.expectEOF(t, testTimeout)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	up.expectNothingFromApp(t)
	m.await(t, "app dropped "+labels.DropInvalidUTF8, 1)
}

// An app that disconnects after a partial line: the part is not sent, the
// drop is counted, the session ends.
func TestTCPUnterminatedLine(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m }, proxy.ListenerTCP)
	a := dialLines(t, e.addr[proxy.ListenerTCP])
	c := up.nextConn(t)
	a.send(t, "whole\n")
	up.expectFromApp(t, c.N(), ws.OpText, "whole")
	a.send(t, "{\"half\":")
	if err := a.conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
	up.expectNothingFromApp(t)
	m.await(t, "app dropped "+labels.DropUnterminated, 1)
	a.expectEOF(t, testTimeout)
}

// tcp:// apps are admitted like WebSocket apps, without a handshake to
// answer: over MaxSessions the socket is closed before any dial; a
// permanent first-dial failure closes it after the dial. Both are counted.
func TestTCPRefusals(t *testing.T) {
	t.Run("max sessions", func(t *testing.T) {
		up := newUpstream(t, upstreamConfig{})
		m := newCounts()
		e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) {
			o.Metrics = m
			o.MaxSessions = 1
		}, proxy.ListenerTCP)
		first := dialLines(t, e.addr[proxy.ListenerTCP])
		up.nextConn(t)
		second := dialLines(t, e.addr[proxy.ListenerTCP])
		second.expectEOF(t, testTimeout)
		m.await(t, "rejected "+labels.RejectMaxSessions, 1)
		first.expectOpen(t)
		if n := up.srv.Handshakes(); n != 1 {
			t.Errorf("upstream saw %d handshakes, want 1", n)
		}
	})
	t.Run("upstream permanent", func(t *testing.T) {
		up := newUpstream(t, upstreamConfig{refuse: func(int) (int, http.Header) { return http.StatusNotFound, nil }})
		m := newCounts()
		e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m }, proxy.ListenerTCP)
		start := time.Now()
		a := dialLines(t, e.addr[proxy.ListenerTCP])
		a.expectEOF(t, acceptWait+slack)
		within(t, "refused", time.Since(start), 0, acceptWait+slack)
		m.await(t, "rejected "+labels.RejectUpstreamPermanent, 1)
		m.await(t, "session ended tcp", 1)
		if n := up.srv.Handshakes(); n != 1 {
			t.Errorf("upstream saw %d handshakes, want 1: a permanent failure is not retried", n)
		}
	})
}

// While the upstream is down, a tcp:// app is accepted after AcceptWait and
// its lines queue; they are sent once the upstream answers.
func TestTCPQueuesWhileUpstreamDown(t *testing.T) {
	up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n <= 2 {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}})
	e := newMultiTether(t, up.srv.URL(), nil, proxy.ListenerTCP)
	a := dialLines(t, e.addr[proxy.ListenerTCP])
	a.send(t, "one\ntwo\n")
	c := up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, "one")
	up.expectFromApp(t, c.N(), ws.OpText, "two")
	a.expectOpen(t)
}

// Shutdown ends a tcp:// app cleanly: the lines already queued are
// delivered, then EOF, and the upstream is closed with 1000.
func TestTCPShutdown(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: commands})
	e := newMultiTether(t, up.srv.URL(), nil, proxy.ListenerTCP)
	a := dialLines(t, e.addr[proxy.ListenerTCP])
	c := up.nextConn(t)
	a.send(t, "echo last words\n")
	a.expectLine(t, "last words")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx, 0); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	a.expectEOF(t, testTimeout)
	expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
}
