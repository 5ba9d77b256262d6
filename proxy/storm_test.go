package proxy_test

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// A server restart drops every session at the same instant (1012 to all).
// Jitter must spread the reconnections instead of bringing them back in
// lockstep, and the restart floor must hold for every one of them.
func TestReconnectStormIsSpread(t *testing.T) {
	const (
		sessions = 100
		floor    = 200 * time.Millisecond
		// Full jitter spreads the first retry over [floor, floor+base). With
		// 20ms buckets, base 100ms gives 5 buckets of 20 expected each, and
		// a bucket above 25 then happens in about half the runs by chance
		// alone. Over 500ms (25 buckets, 4 expected) it takes a lockstep
		// storm, which puts nearly all 100 in one or two buckets, or a
		// machine frozen for a sixth of the spread.
		base     = 500 * time.Millisecond
		bucket   = 20 * time.Millisecond
		maxShare = sessions / 4
	)
	trigger := make(chan struct{})
	up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if c.N() > sessions {
			<-c.Done() // a reconnection: stay up
			return
		}
		select {
		case <-trigger:
			_ = c.CloseWith(1012, "restarting")
		case <-c.Done():
		}
	}})
	core, logs := observer.New(zapcore.InfoLevel)
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.MaxSessions = sessions
		o.Logger = zap.New(zapcore.NewTee(quietLogger(t).Core(), core))
		o.Upstream.Backoff = upstream.Backoff{Jitter: upstream.JitterFull, Base: base, Cap: 4 * base}
		o.Upstream.Close.RestartFloor = floor
		noHeartbeat(o) // a hundred sessions: a late pong must not add a reconnection
	})
	apps := make([]*app, sessions)
	for i := range apps {
		// Accepted only once its upstream connection is open (first dial).
		apps[i] = dialApp(t, e.url, appOptions{})
	}
	nextHandshakes(t, up, sessions)

	restart := time.Now()
	close(trigger)
	// The server must see every session again, none before the floor.
	for _, h := range nextHandshakes(t, up, sessions) {
		if after := h.at.Sub(restart); after < floor {
			t.Errorf("a reconnection reached the upstream %v after the 1012, before RestartFloor %v", after, floor)
		}
	}
	// The spread is measured where jitter acts, in the delay each client
	// chose after the 1012. When the dials began was measured before: a
	// loaded machine that froze the process for half a second (load 20)
	// had the timers due meanwhile fire together, and 26 of them landed in
	// one bucket. Every reconnection is scheduled before it dials, so all
	// are logged once the server saw them.
	counts := map[int]int{} // bucket index → redials
	for _, d := range redialDelays(t, logs, sessions) {
		counts[int(d/bucket)]++
	}
	for b, n := range counts {
		if n > maxShare {
			t.Errorf("%d of %d redials in [%v, %v): lockstep, want at most %d per %v",
				n, sessions, time.Duration(b)*bucket, time.Duration(b+1)*bucket, maxShare, bucket)
		}
	}
	t.Logf("redials per %v bucket after the restart: %v", bucket, counts)
	for _, a := range apps {
		a.expectOpen(t)
	}
}

// nextHandshakes returns the next n handshakes the upstream saw, in whatever
// order their goroutines reported them.
func nextHandshakes(t *testing.T, up *upstreamEnv, n int) []handshakeInfo {
	t.Helper()
	out := make([]handshakeInfo, 0, n)
	deadline := time.After(testTimeout)
	for len(out) < n {
		select {
		case h := <-up.handshakes:
			out = append(out, h)
		case <-deadline:
			t.Fatalf("%d of %d handshakes within %v", len(out), n, testTimeout)
		}
	}
	return out
}

// redialDelays returns the delays the sessions chose for their reconnection
// after a restart (those with a floor), which must be n.
func redialDelays(t *testing.T, logs *observer.ObservedLogs, n int) []time.Duration {
	t.Helper()
	entries := logs.FilterMessage("upstream reconnect scheduled").FilterFieldKey("floor").All()
	if len(entries) != n {
		t.Fatalf("%d reconnections scheduled after the restart, want %d", len(entries), n)
	}
	out := make([]time.Duration, 0, n)
	for _, e := range entries {
		d, ok := e.ContextMap()["delay"].(time.Duration)
		if !ok {
			t.Fatalf("reconnect scheduled without a delay: %v", e.ContextMap())
		}
		out = append(out, d)
	}
	return out
}
