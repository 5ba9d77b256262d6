package proxy_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// TestServerStatus follows one session through a sequenced feed with a
// duplicate and a gap, an upstream restart (1012) followed by refused dials
// while the app keeps sending, and the reconnect that flushes its outbox.
func TestServerStatus(t *testing.T) {
	var refusing atomic.Bool
	u := newUpstream(t, upstreamConfig{
		refuse: func(n int) (int, http.Header) {
			if n > 1 && refusing.Load() {
				return http.StatusServiceUnavailable, nil
			}
			return 0, nil
		},
		onConn: func(u *upstreamEnv, c *upstreamtest.Conn) {
			if c.N() == 1 {
				for _, m := range []string{`{"seq":1}`, `{"seq":1}`, `{"seq":2}`, `{"seq":4}`, `{"seq":3}`} {
					_ = c.Send(m)
				}
				<-c.Context().Done()
				return
			}
			u.record(c)
		},
	})
	e := newTether(t, u.srv.URL()+"feed?token=secret", func(o *proxy.Options) {
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Sequences = proxy.Sequences{GapTimeout: time.Second}
	})
	a := dialApp(t, e.url, appOptions{})
	for _, want := range []string{`{"seq":1}`, `{"seq":2}`, `{"seq":3}`, `{"seq":4}`} {
		a.expectText(t, want)
	}
	e.states.await(t, upstream.StateConfirmed)
	st := e.srv.Status()
	if len(st.Sessions) != 1 || st.Draining || st.MaxSessions != 16 {
		t.Fatalf("status %+v, want one session of at most 16, not draining", st)
	}
	s := st.Sessions[0]
	switch {
	case !s.Admitted || !s.Live || s.Listener != proxy.ListenerWS || s.Started.IsZero():
		t.Errorf("live session %+v", s)
	case strings.Contains(s.Upstream, "secret") || s.Upstream != u.srv.URL()+"feed":
		t.Errorf("upstream %q, want %sfeed without the query", s.Upstream, u.srv.URL())
	case s.Duplicates != 1 || s.Gaps[labels.GapFilled] != 1 || len(s.Gaps) != 1:
		t.Errorf("duplicates %d gaps %v, want 1 duplicate and 1 gap filled", s.Duplicates, s.Gaps)
	case s.Connection.State != upstream.StateConfirmed || s.Connection.Gen != 1:
		t.Errorf("connection %+v, want the first, confirmed", s.Connection)
	}

	refusing.Store(true)
	first := u.nextConn(t)
	_ = first.CloseWith(1012, "restart")
	e.states.await(t, upstream.StateWaiting)
	a.sendText(t, "while away")
	eventually(t, "the message queued", func() bool { return e.srv.Status().Sessions[0].OutboxMessages == 1 })
	s = e.srv.Status().Sessions[0]
	if s.Live || s.OutboxBytes != len("while away") {
		t.Errorf("down session live %v outbox bytes %d, want not live and %d", s.Live, s.OutboxBytes, len("while away"))
	}
	if !hasEvent(s.Connection.Recent, func(e upstream.Event) bool {
		return e.Kind == upstream.EventLost && e.CloseCode == 1012 && e.CloseReason == "restart"
	}) {
		t.Errorf("recent %+v lacks the 1012 loss", s.Connection.Recent)
	}
	eventually(t, "a refused dial", func() bool {
		return e.srv.Status().Sessions[0].Connection.LastFailure.HTTPStatus == http.StatusServiceUnavailable
	})
	if c := e.srv.Status().Sessions[0].Connection; c.DownSince.IsZero() || c.Attempt < 2 {
		t.Errorf("connection %+v, want down, 2 attempts or more", c)
	}

	refusing.Store(false)
	select {
	case m := <-u.fromApp:
		if m.op != ws.OpText || m.data != "while away" {
			t.Fatalf("upstream read %v %q after the reconnect, want the queued message", m.op, m.data)
		}
	case <-time.After(testTimeout):
		t.Fatalf("the queued message did not reach the upstream within %v", testTimeout)
	}
	eventually(t, "the reconnect in the status", func() bool {
		c := e.srv.Status().Sessions[0].Connection
		return c.Reconnects == 1 && c.State == upstream.StateConfirmed
	})
	if s = e.srv.Status().Sessions[0]; s.OutboxMessages != 0 || !s.Live {
		t.Errorf("restored session outbox %d live %v, want empty and live", s.OutboxMessages, s.Live)
	}
}

func hasEvent(events []upstream.Event, match func(upstream.Event) bool) bool {
	for _, e := range events {
		if match(e) {
			return true
		}
	}
	return false
}
