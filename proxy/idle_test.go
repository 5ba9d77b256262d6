package proxy_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/proxy"
)

// An idle WebSocket session runs at most two goroutines of tether's: the
// app's reader and the upstream connection's reader. The sockets' writers
// run only while something is queued, the upstream client's state machine
// only while one of its events is pending, and the app socket is closed
// with the upstream's code from the client's own goroutine, not from a
// goroutine waiting for it. The heartbeat is off: its probes are traffic,
// which starts writers and the state machine for a moment.
func TestIdleSessionGoroutines(t *testing.T) {
	const sessions, perSession = 20, 2
	up := newUpstream(t, upstreamConfig{quiet: true})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		noHeartbeat(o)
		o.Logger = quietLogger(t)
		o.MaxSessions = sessions
	})
	before := tetherGoroutines()
	for range sessions {
		dialApp(t, e.url, appOptions{})
		up.nextConn(t)
	}
	e.expectSessions(t, sessions)
	// The writers of the handshakes' last frames and the restore goroutines
	// exit with no event to wait for: poll, bounded.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for {
		extra := tetherGoroutines() - before
		if extra <= sessions*perSession {
			t.Logf("%d goroutines of tether's for %d idle sessions", extra, sessions)
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d goroutines of tether's for %d idle sessions, want at most %d per session", extra, sessions, perSession)
		}
	}
}

// tetherGoroutines counts the goroutines running tether's code (proxy,
// upstream, internal packages), leaving out the tests' own and their
// servers'.
func tetherGoroutines() int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "_test.") || strings.Contains(s, "upstreamtest.") {
			continue
		}
		for _, pkg := range []string{"/tether/proxy.", "/tether/upstream.", "/tether/internal/"} {
			if strings.Contains(s, "github.com/tetherproxy"+pkg) {
				n++
				break
			}
		}
	}
	return n
}
