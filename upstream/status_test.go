package upstream_test

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// TestStatusAcrossALoss follows Status through a confirmed connection that
// the upstream closes with 1012 and the reconnect after it.
func TestStatusAcrossALoss(t *testing.T) {
	const floor = 50 * time.Millisecond // the 1012 floor: every delay is at least this
	srv := newServer(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		_ = c.Send("welcome")
		if c.N() == 1 {
			_ = c.CloseWith(1012, "restart")
			return
		}
		holdOpen(c)
	}})
	h := newHandler()
	opts := testOptions(t, srv.URL(), h)
	opts.Close = closePolicy(t, upstream.DefaultPermanentCodes, floor, floor)
	opts.Confirm = func([]byte) bool { return true }
	st := newStatusLog(&opts)
	started := time.Now()
	startNew(t, opts, st.watch)

	s := st.waitFor(t, upstream.StateConfirmed)
	if s.State != upstream.StateConfirmed || s.Gen != 1 || s.Attempt != 0 || !s.DownSince.IsZero() || s.Reconnects != 0 {
		t.Errorf("after the first confirmation: %+v", s)
	}
	if n := len(s.Recent); n != 1 || s.Recent[0].Kind != upstream.EventConnected {
		t.Errorf("recent %+v, want one %q", s.Recent, upstream.EventConnected)
	}

	s = st.waitFor(t, upstream.StateWaiting)
	lost := s.LastFailure
	switch {
	case s.State != upstream.StateWaiting || s.Attempt != 1:
		t.Errorf("after the close: state %v attempt %d, want waiting 1", s.State, s.Attempt)
	case lost.Kind != upstream.EventLost || lost.Reason != "close" || lost.CloseCode != 1012 || lost.CloseReason != "restart":
		t.Errorf("last failure %+v, want lost close 1012 \"restart\"", lost)
	case lost.Attempt != 1 || lost.Delay < floor:
		t.Errorf("last failure attempt %d delay %v, want 1 and at least the 1012 floor %v", lost.Attempt, lost.Delay, floor)
	case s.NextRetry.Before(lost.At.Add(lost.Delay)):
		t.Errorf("next retry %v, before the loss %v plus its delay %v", s.NextRetry, lost.At, lost.Delay)
	case s.DownSince.IsZero() || s.DownSince.Before(started):
		t.Errorf("down since %v, want the loss", s.DownSince)
	}

	s = st.waitFor(t, upstream.StateConfirmed)
	last := s.Recent[len(s.Recent)-1]
	switch {
	case s.Reconnects != 1 || s.Attempt != 0 || !s.DownSince.IsZero() || s.Gen != 2:
		t.Errorf("after the reconnect: %+v", s)
	case last.Kind != upstream.EventRestored || last.Downtime < lost.Delay:
		t.Errorf("latest event %+v, want %q with a downtime of at least the delay %v", last, upstream.EventRestored, lost.Delay)
	case s.LastFailure != lost || s.LastClose != lost:
		t.Errorf("last failure %+v, last close %+v, want both the 1012 loss %+v", s.LastFailure, s.LastClose, lost)
	}
	kinds := []upstream.EventKind{upstream.EventConnected, upstream.EventLost, upstream.EventRestored}
	for i, e := range s.Recent {
		if i >= len(kinds) || e.Kind != kinds[i] {
			t.Fatalf("recent %+v, want kinds %v", s.Recent, kinds)
		}
	}
}

// statusLog records a Client's Status as each state change left it. OnState
// runs on the Client's goroutine right after the change is written to the
// status board and before the Client goes on, so a snapshot taken there is
// that state's, however late the test reads it; a Status read after waiting
// for the state may already show the next one (a 1012 right after the
// welcome, a 50ms backoff that ended while the test was descheduled).
type statusLog struct {
	client atomic.Pointer[upstream.Client]
	ch     chan upstream.Status
}

// newStatusLog makes opts record into the log; watch must be given the
// Client before it starts.
func newStatusLog(opts *upstream.Options) *statusLog {
	l := &statusLog{ch: make(chan upstream.Status, 4096)}
	opts.OnState = l.record
	return l
}

func (l *statusLog) watch(c *upstream.Client) { l.client.Store(c) }

func (l *statusLog) record(upstream.State) {
	select {
	case l.ch <- l.client.Load().Status():
	default: // a full log loses the snapshot, and waitFor reports the state missing
	}
}

// waitFor consumes snapshots until one in state want, and returns it.
func (l *statusLog) waitFor(t *testing.T, want upstream.State) upstream.Status {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		select {
		case s := <-l.ch:
			if s.State == want {
				return s
			}
		case <-deadline.C:
			t.Fatalf("state %v not reached within %v", want, waitLimit)
		}
	}
}

// TestStatusGivesUp: refused dials until TETHER_MAX_ATTEMPTS, more of them
// than the history keeps.
func TestStatusGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String() + "/"
	_ = ln.Close() // nothing listens there now: each dial is refused
	const attempts = upstream.RecentEvents + 2
	opts := testOptions(t, url, newHandler())
	opts.MaxAttempts = attempts
	c := startClient(t, opts)
	for !isClosed(c.Done()) {
		_ = c.Status() // concurrently with the Client: -race checks the board's lock
		select {
		case <-c.Done():
		case <-time.After(time.Millisecond):
		}
	}
	s := c.Status()
	if s.State != upstream.StateClosed || s.GaveUp != "refused" || s.Attempt != attempts {
		t.Errorf("after giving up: state %v gave up %q attempt %d, want closed, refused, %d", s.State, s.GaveUp, s.Attempt, attempts)
	}
	if len(s.Recent) != upstream.RecentEvents {
		t.Fatalf("%d recent events, want the last %d", len(s.Recent), upstream.RecentEvents)
	}
	// attempts failures and the stop: the oldest fell out of the history.
	first := attempts + 1 - upstream.RecentEvents + 1
	for i, e := range s.Recent[:len(s.Recent)-1] {
		if e.Kind != upstream.EventDialFailed || e.Reason != "refused" || e.Attempt != first+i {
			t.Errorf("recent[%d] = %+v, want dial_failed refused attempt %d", i, e, first+i)
		}
		if i < len(s.Recent)-2 && e.Delay <= 0 {
			t.Errorf("recent[%d] has no backoff delay", i)
		}
	}
	if last := s.Recent[len(s.Recent)-1]; last.Kind != upstream.EventGaveUp || last.Reason != "refused" {
		t.Errorf("latest event %+v, want gave_up refused", last)
	}
	if s.DownSince.IsZero() || s.Reconnects != 0 {
		t.Errorf("a Client that never connected: down since %v, %d reconnects; want down since its start, none", s.DownSince, s.Reconnects)
	}
}

// TestStatusHTTPRefusals: the HTTP status of a refused handshake is kept,
// and a stop for want of credentials is named after it (ErrAuthFailed
// itself carries no status).
func TestStatusHTTPRefusals(t *testing.T) {
	srv := newServer(t, upstreamtest.Options{Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
		if h.N == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusUnauthorized, nil
	}})
	opts := testOptions(t, srv.URL(), newHandler())
	opts.AuthFailuresMax = 2
	c := startClient(t, opts)
	waitClosed(t, c.Done(), "the Client to give up")
	s := c.Status()
	want := []struct {
		kind   upstream.EventKind
		reason string
		status int
	}{
		{upstream.EventDialFailed, "http_5xx", 503},
		{upstream.EventDialFailed, "http_401", 401},
		{upstream.EventDialFailed, "http_401", 401},
		{upstream.EventGaveUp, "http_401", 401},
	}
	if len(s.Recent) != len(want) {
		t.Fatalf("recent %+v, want %d events", s.Recent, len(want))
	}
	for i, w := range want {
		if e := s.Recent[i]; e.Kind != w.kind || e.Reason != w.reason || e.HTTPStatus != w.status {
			t.Errorf("recent[%d] = %+v, want %s %s HTTP %d", i, e, w.kind, w.reason, w.status)
		}
	}
	if s.GaveUp != "http_401" {
		t.Errorf("gave up %q, want http_401", s.GaveUp)
	}
}
