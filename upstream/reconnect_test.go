package upstream_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// TestResetMidStream: a TCP reset in the middle of a stream ends the
// connection (Lost with its generation), the Client reconnects on a higher
// generation, and the new connection's messages are delivered.
func TestResetMidStream(t *testing.T) {
	resetNow := make(chan struct{})
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send(fmt.Sprintf("%d-a", c.N()))
		_ = c.Send(fmt.Sprintf("%d-b", c.N()))
		if c.N() == 1 {
			select {
			case <-resetNow:
				_ = c.Reset()
			case <-c.Context().Done():
			}
			return
		}
		holdOpen(c)
	}})
	h := newHandler()
	startClient(t, testOptions(t, srv.URL(), h))

	for _, want := range []string{"1-a", "1-b"} {
		if m := h.nextMessage(t); m.gen != 1 || m.data != want {
			t.Fatalf("Message(gen %d, %q), want (gen 1, %q)", m.gen, m.data, want)
		}
	}
	close(resetNow)
	lost := h.nextLost(t)
	var ce *upstream.CloseError
	if lost.gen != 1 || lost.err == nil || errors.As(lost.err, &ce) {
		t.Fatalf("Lost(gen %d, %v), want gen 1 with a socket error", lost.gen, lost.err)
	}
	h.nextRestore(t) // gen 1
	r := h.nextRestore(t)
	if r.gen <= lost.gen {
		t.Fatalf("reconnected on gen %d, want > %d", r.gen, lost.gen)
	}
	for _, want := range []string{"2-a", "2-b"} {
		if m := h.nextMessage(t); m.gen != r.gen || m.data != want {
			t.Fatalf("Message(gen %d, %q), want (gen %d, %q)", m.gen, m.data, r.gen, want)
		}
	}
	if got := h.messagesOf(1); !slices.Equal(got, []string{"1-a", "1-b"}) {
		t.Errorf("gen 1 messages %q, want [1-a 1-b]", got)
	}
	// Every call for a connection precedes its Lost, and Lost precedes every
	// call for the next one: the owner never sees two connections at once.
	calls := h.calls()
	lostAt := slices.Index(calls, "lost 1")
	for i, call := range calls {
		if gen1 := strings.HasSuffix(call, " 1"); gen1 != (i <= lostAt) {
			t.Errorf("call order %q: %q on the wrong side of \"lost 1\"", calls, call)
		}
	}
}

// TestCloseCodeFloors: after a server close the Client reconnects; after
// 1012 and 1013 not before the configured floor (docs/design.md "Floors").
func TestCloseCodeFloors(t *testing.T) {
	const (
		base          = 10 * time.Millisecond
		restartFloor  = 300 * time.Millisecond
		tryAgainFloor = 500 * time.Millisecond
	)
	tests := []struct {
		code      int
		wantDelay time.Duration // exact with JitterNone
	}{
		{code: 1001, wantDelay: base},
		{code: 1012, wantDelay: restartFloor},
		{code: 1013, wantDelay: tryAgainFloor},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			closedAt := make(chan time.Time, 1)
			hs := newHandshakeLog()
			srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: func(c *upstreamtest.Conn) {
				if c.N() == 1 {
					closedAt <- time.Now()
					_ = c.CloseWith(tt.code, "bye")
					return
				}
				holdOpen(c)
			}})
			h := newHandler()
			opts := testOptions(t, srv.URL(), h)
			opts.Backoff.Base = base
			opts.Close = closePolicy(t, upstream.DefaultPermanentCodes, restartFloor, tryAgainFloor)
			logs := observe(t, &opts)
			startClient(t, opts)

			lost := h.nextLost(t)
			var ce *upstream.CloseError
			if !errors.As(lost.err, &ce) || ce.Code != tt.code || ce.Reason != "bye" {
				t.Fatalf("Lost(gen %d, %v), want close %d \"bye\"", lost.gen, lost.err, tt.code)
			}
			h.nextRestore(t) // gen 1
			if r := h.nextRestore(t); r.gen != 2 {
				t.Fatalf("reconnected on gen %d, want 2", r.gen)
			}
			gap := hs.times()[1].Sub(recv(t, closedAt, "close time"))
			t.Logf("close %d: next handshake %v after the close frame", tt.code, gap)
			if gap < tt.wantDelay {
				t.Errorf("next handshake %v after close %d, want ≥ %v", gap, tt.code, tt.wantDelay)
			}
			if got := scheduledDelays(logs); len(got) != 1 || got[0] != tt.wantDelay {
				t.Errorf("scheduled delays %v, want [%v]", got, tt.wantDelay)
			}
		})
	}
}

// TestAcceptThenDrop: a server that accepts and at once drops every
// connection must not reset the attempt counter (docs/design.md "Reset rule"),
// so the waits keep doubling. Once each connection is confirmed, by a
// matching message or by staying open for StableAfter, every wait is the
// first one again.
func TestAcceptThenDrop(t *testing.T) {
	const (
		base   = 20 * time.Millisecond
		limit  = 2 * time.Second
		drops  = 6
		waited = drops - 1
	)
	doubling := func(i int) time.Duration { return base << i }
	first := func(int) time.Duration { return base }
	tests := []struct {
		name  string
		setup func(opts *upstream.Options, confirmed chan struct{})
		serve func(c *upstreamtest.Conn, confirmed chan struct{}) // returning drops the connection
		want  func(i int) time.Duration                           // the i-th wait, exact with JitterNone
	}{
		{
			name:  "unconfirmed",
			setup: func(*upstream.Options, chan struct{}) {},
			serve: func(*upstreamtest.Conn, chan struct{}) {},
			want:  doubling,
		},
		{
			name: "confirmed by message",
			setup: func(opts *upstream.Options, _ chan struct{}) {
				opts.Confirm = func(b []byte) bool { return string(b) == "ready" }
			},
			serve: func(c *upstreamtest.Conn, _ chan struct{}) { _ = c.Send("ready") },
			want:  first,
		},
		{
			name: "confirmed by StableAfter",
			setup: func(opts *upstream.Options, confirmed chan struct{}) {
				opts.StableAfter = 30 * time.Millisecond
				opts.OnState = func(s upstream.State) {
					if s == upstream.StateConfirmed {
						confirmed <- struct{}{}
					}
				}
			},
			serve: func(c *upstreamtest.Conn, confirmed chan struct{}) {
				select {
				case <-confirmed:
				case <-c.Context().Done():
				}
			},
			want: first,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			confirmed := make(chan struct{}, 1024)
			hs := newHandshakeLog()
			srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: func(c *upstreamtest.Conn) {
				tt.serve(c, confirmed)
			}})
			h := newHandler()
			opts := testOptions(t, srv.URL(), h)
			opts.Backoff = upstream.Backoff{Jitter: upstream.JitterNone, Base: base, Cap: limit}
			opts.StableAfter = time.Hour
			tt.setup(&opts, confirmed)
			logs := observe(t, &opts)
			c := startClient(t, opts)

			hs.waitN(t, drops)
			c.Close()
			at := hs.times()
			for i := range waited {
				gap := at[i+1].Sub(at[i])
				t.Logf("wait %d: gap between handshakes %v", i, gap)
				if want := tt.want(i); gap < want {
					t.Errorf("gap %d between handshakes %v, want ≥ %v", i, gap, want)
				}
			}
			delays := scheduledDelays(logs)
			if len(delays) < waited {
				t.Fatalf("%d waits logged, want ≥ %d", len(delays), waited)
			}
			for i, d := range delays[:waited] {
				if want := tt.want(i); d != want {
					t.Errorf("wait %d chosen %v, want %v (all: %v)", i, d, want, delays)
				}
			}
			if t.Failed() {
				for _, e := range logs.FilterMessage(scheduled).All() {
					t.Logf("scheduled: %v", e.ContextMap())
				}
			}
		})
	}
}

// TestClosePolicy: permanent close codes stop the Client with the server's
// code and reason; reauth codes reconnect with the token re-read.
func TestClosePolicy(t *testing.T) {
	tests := []struct {
		name      string
		permanent string
		code      int
		reason    string
		wantStop  bool
	}{
		{name: "1008 default permanent", permanent: upstream.DefaultPermanentCodes, code: 1008, reason: "bad subscription", wantStop: true},
		{name: "4501 in custom range", permanent: upstream.DefaultPermanentCodes + ",4500-4599", code: 4501, reason: "quota", wantStop: true},
		{name: "4501 not listed", permanent: upstream.DefaultPermanentCodes, code: 4501, reason: "quota"},
		{name: "4001 reauth", permanent: upstream.DefaultPermanentCodes, code: 4001, reason: "token expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := filepath.Join(t.TempDir(), "token")
			writeFile(t, token, "first")
			hs := newHandshakeLog()
			srv := newServer(t, upstreamtest.Options{Handshake: hs.handshake, OnConn: func(c *upstreamtest.Conn) {
				if c.N() == 1 {
					writeFile(t, token, "second") // rotated while connected
					_ = c.CloseWith(tt.code, tt.reason)
					return
				}
				holdOpen(c)
			}})
			h := newHandler()
			opts := testOptions(t, srv.URL(), h)
			opts.TokenFile = token
			opts.Close = closePolicy(t, tt.permanent, time.Second, time.Second)
			c := startClient(t, opts)

			lost := h.nextLost(t)
			want := &upstream.CloseError{Code: tt.code, Reason: tt.reason}
			var ce *upstream.CloseError
			if !errors.As(lost.err, &ce) || *ce != *want {
				t.Fatalf("Lost(%v), want %v", lost.err, want)
			}
			if tt.wantStop {
				waitClosed(t, c.Done(), "Client stop")
				if !errors.As(c.Err(), &ce) || *ce != *want {
					t.Errorf("Err() = %#v, want %#v", c.Err(), want)
				}
				if n := srv.Handshakes(); n != 1 {
					t.Errorf("%d handshakes after a permanent close, want 1", n)
				}
				return
			}
			h.nextRestore(t) // gen 1
			if r := h.nextRestore(t); r.gen != 2 {
				t.Fatalf("reconnected on gen %d, want 2", r.gen)
			}
			if got := hs.header(1).Get("Authorization"); got != "Bearer second" {
				t.Errorf("reconnect sent Authorization %q, want the rotated token", got)
			}
			if isClosed(c.Done()) {
				t.Errorf("Client stopped: %v", c.Err())
			}
		})
	}
}

// writeFile writes a token file; it may run on a test server's goroutine.
func writeFile(t *testing.T, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Errorf("write %s: %v", path, err)
	}
}

// TestOversizedMessage: an upstream message over MaxMessageBytes is refused
// with close 1009, and the Client stops with a reason naming the limit (1009
// is permanent by default: the server would send the same message again).
func TestOversizedMessage(t *testing.T) {
	const limit = 1024
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send(strings.Repeat("x", limit))
		_ = c.Send(strings.Repeat("y", limit+1))
		holdOpen(c)
	}})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.MaxMessageBytes = limit
	c := startClient(t, opts)
	sc := recv(t, srv.Conns(), "server conn")

	if m := h.nextMessage(t); len(m.data) != limit {
		t.Errorf("first message %d bytes, want %d (at the limit)", len(m.data), limit)
	}
	waitClosed(t, c.Done(), "Client stop")
	var ce *upstream.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != 1009 || !strings.Contains(ce.Reason, "TETHER_MAX_MESSAGE_BYTES") {
		t.Errorf("Err() = %v, want close 1009 naming TETHER_MAX_MESSAGE_BYTES", c.Err())
	}
	waitClosed(t, sc.Done(), "server conn closed")
	if code, _, ok := sc.ReceivedClose(); !ok || code != 1009 {
		t.Errorf("server received close %d (ok %v), want 1009", code, ok)
	}
	if n := srv.Handshakes(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
}
