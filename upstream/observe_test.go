package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// observed is one call a Client made on its Observer.
type observed struct {
	call     string // "dialed", "lost" or "confirmed"
	label    string // dial result or loss reason
	code     int
	downtime time.Duration
}

func (o observed) String() string {
	switch o.call {
	case "lost":
		return fmt.Sprintf("lost %s %d", o.label, o.code)
	case "confirmed":
		return "confirmed"
	}
	return o.call + " " + o.label
}

// recorder is an upstream.Observer reporting every call on a channel.
type recorder struct{ ch chan observed }

func newRecorder() *recorder { return &recorder{ch: make(chan observed, 1024)} }

func (r *recorder) Dialed(result string) { r.ch <- observed{call: "dialed", label: result} }
func (r *recorder) Lost(reason string, code int) {
	r.ch <- observed{call: "lost", label: reason, code: code}
}
func (r *recorder) Confirmed(d time.Duration) { r.ch <- observed{call: "confirmed", downtime: d} }

// expect fails unless the next calls are want, in order.
func (r *recorder) expect(t *testing.T, want ...string) []observed {
	t.Helper()
	got := make([]observed, 0, len(want))
	for _, w := range want {
		o := recv(t, r.ch, w)
		if o.String() != w {
			t.Fatalf("observer call %q, want %q (calls so far %v)", o, w, got)
		}
		got = append(got, o)
	}
	return got
}

// TestObserverLifecycle: a reset, a 1012 and refused handshakes reach the
// Observer with bounded labels, and each confirmation after a loss reports
// the downtime since that loss, floor included.
func TestObserverLifecycle(t *testing.T) {
	const restartFloor = 150 * time.Millisecond
	srv := newServer(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			switch h.N {
			case 3:
				return http.StatusServiceUnavailable, nil
			case 4:
				return http.StatusUnauthorized, nil
			}
			return 0, nil
		},
		OnConn: func(c *upstreamtest.Conn) {
			_ = c.Send("welcome")
			if _, _, err := c.Read(c.Context()); err != nil {
				return
			}
			switch c.N() {
			case 1:
				_ = c.Reset()
			case 2:
				_ = c.CloseWith(1012, "restarting")
			default:
				holdOpen(c)
			}
		},
	})
	h := newHandler()
	rec := newRecorder()
	opts := testOptions(t, srv.URL(), h)
	opts.Confirm = func(b []byte) bool { return string(b) == "welcome" }
	opts.Close = closePolicy(t, upstream.DefaultPermanentCodes, restartFloor, time.Second)
	opts.Observer = rec
	startClient(t, opts)

	kick := func() {
		t.Helper()
		r := h.nextRestore(t)
		h.nextMessage(t) // welcome: confirmed
		if err := r.conn.SendText(context.Background(), []byte("go")); err != nil {
			t.Fatal(err)
		}
	}
	kick()
	rec.expect(t, "dialed ok", "lost reset 0", "dialed ok")
	kick()
	got := rec.expect(t, "confirmed", "lost close 1012", "dialed http_5xx", "dialed http_401", "dialed ok", "confirmed")
	h.nextRestore(t)
	if d := got[0].downtime; d <= 0 || d > slack {
		t.Errorf("downtime after a reset = %v, want in (0, %v]", d, slack)
	}
	if d := got[len(got)-1].downtime; d < restartFloor {
		t.Errorf("downtime after 1012 = %v, want ≥ the restart floor %v", d, restartFloor)
	}
}

// TestObserverLossReasons: each way a connection can end is named.
func TestObserverLossReasons(t *testing.T) {
	tests := []struct {
		name  string
		then  func(c *upstreamtest.Conn)
		pings bool
		want  string
	}{
		{name: "eof", then: func(*upstreamtest.Conn) {}, want: "lost eof 0"},
		{name: "going away", then: func(c *upstreamtest.Conn) { _ = c.CloseWith(1001, "bye") }, want: "lost close 1001"},
		{name: "permanent close", then: func(c *upstreamtest.Conn) { _ = c.CloseWith(1008, "no") }, want: "lost close 1008"},
		{name: "heartbeat", then: func(c *upstreamtest.Conn) { c.Stall(); holdOpen(c) }, pings: true, want: "lost heartbeat 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, upstreamtest.Options{
				IgnorePings: true,
				OnConn: func(c *upstreamtest.Conn) {
					if c.N() == 1 {
						tc.then(c)
						return
					}
					holdOpen(c)
				},
			})
			rec := newRecorder()
			opts := testOptions(t, srv.URL(), newHandler())
			if tc.pings {
				opts.PingInterval, opts.PingTimeout = pingInterval, pingTimeout
			}
			opts.Observer = rec
			startClient(t, opts)
			rec.expect(t, "dialed ok", tc.want)
		})
	}
}

// TestObserverDialResults: failed dials are named by cause.
func TestObserverDialResults(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "ws://" + closed.Addr().String() + "/"
	_ = closed.Close()
	silentURL, _ := silent(t)
	missing := filepath.Join(t.TempDir(), "token")

	tests := []struct {
		name  string
		url   string
		setup func(o *upstream.Options)
		want  string
	}{
		{name: "refused", url: refusedURL, want: "dialed refused"},
		{name: "timeout", url: silentURL, setup: func(o *upstream.Options) { o.DialTimeout = 50 * time.Millisecond }, want: "dialed timeout"},
		{name: "token", url: refusedURL, setup: func(o *upstream.Options) { o.TokenFile = missing }, want: "dialed token"},
		{name: "bad url", url: "http://example.invalid/", want: "dialed bad_url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			opts := testOptions(t, tc.url, newHandler())
			opts.Observer = rec
			if tc.setup != nil {
				tc.setup(&opts)
			}
			startClient(t, opts)
			rec.expect(t, tc.want)
		})
	}
}

// TestObserverNotToldOfClose: a dial or a connection cut by Close is not a
// failure of the upstream and is not reported.
func TestObserverNotToldOfClose(t *testing.T) {
	url, accepted := silent(t)
	rec := newRecorder()
	opts := testOptions(t, url, newHandler())
	opts.DialTimeout = time.Minute
	opts.Observer = rec
	c := startClient(t, opts)
	recv(t, accepted, "connection")
	c.Close()

	srv := newServer(t, upstreamtest.Options{OnConn: holdOpen})
	h := newHandler()
	opts = testOptions(t, srv.URL(), h)
	opts.Observer = rec
	c = startClient(t, opts)
	h.nextRestore(t)
	c.Close()
	rec.expect(t, "dialed ok")
	if o, ok := pending(rec.ch); ok {
		t.Errorf("observer told %q after Close", o)
	}
}

// TestProbe: a probe dials with the Client's credentials, closes with 1000,
// and reports refusals as *StatusError.
func TestProbe(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refuse := make(chan int, 1)
	auth := make(chan string, 2)
	srv := newServer(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			auth <- h.Header.Get("Authorization")
			select {
			case status := <-refuse:
				return status, nil
			default:
				return 0, nil
			}
		},
		OnConn: func(c *upstreamtest.Conn) {
			_ = c.Send("pushed before the close")
			holdOpen(c)
		},
	})
	opts := testOptions(t, srv.URL(), newHandler())
	opts.TokenFile = token
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	if err := upstream.Probe(ctx, opts); err != nil {
		t.Fatalf("Probe = %v, want nil", err)
	}
	if got := recv(t, auth, "handshake"); got != "Bearer s3cret" {
		t.Errorf("probe sent Authorization %q, want the token file's", got)
	}
	conn := recv(t, srv.Conns(), "probe connection")
	waitClosed(t, conn.Done(), "probe connection end")
	if code, _, ok := conn.ReceivedClose(); !ok || code != 1000 {
		t.Errorf("probe closed with %d (close frame %v), want 1000", code, ok)
	}

	refuse <- http.StatusServiceUnavailable
	err := upstream.Probe(ctx, opts)
	var se *upstream.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Errorf("Probe against a 503 = %v, want *StatusError 503", err)
	}
}
