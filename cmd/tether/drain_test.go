package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// drainSlack is added to TETHER_DRAIN_TIMEOUT for the bound on a drain:
// scheduling under -race. A drain that is not interrupted takes
// TETHER_DRAIN_TIMEOUT + shutdownGrace and fails with an error instead.
const drainSlack = time.Second

// checkPromptDrain stops r (what SIGTERM does) and fails unless serveProxy
// returned nil (exit 0) within drain + drainSlack and the app was closed
// with 1001.
func checkPromptDrain(t *testing.T, r *running, app *testApp, drain time.Duration) {
	t.Helper()
	took, err := r.stop(t)
	if err != nil {
		t.Errorf("serveProxy after cancel = %v, want nil (exit code %d, want 0)", err, exitCode(err, testWriter{t}))
	}
	if took > drain+drainSlack {
		t.Errorf("drain took %v, want ≤ TETHER_DRAIN_TIMEOUT %v + %v", took, drain, drainSlack)
	}
	app.expectClose(t, 1001)
	r.awaitLog(t, "drain finished")
}

// testWriter sends exitCode's message to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestDrainDuringBackoff: SIGTERM while a session waits out a one-minute
// backoff delay ends at once, with exit 0.
func TestDrainDuringBackoff(t *testing.T) {
	const drain = time.Second
	up := newTestUpstream(t, upstreamtest.Options{Handshake: func(upstreamtest.Handshake) (int, http.Header) {
		return http.StatusServiceUnavailable, nil
	}})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":  up.URL(),
		"TETHER_BACKOFF_BASE":  "1m",
		"TETHER_BACKOFF_CAP":   "1m",
		"TETHER_DRAIN_TIMEOUT": drain.String(),
	})
	app := dialTestApp(t, r.appURL)
	r.awaitLog(t, "upstream reconnect scheduled") // now in the one-minute wait
	checkPromptDrain(t, r, app, drain)
	if n := up.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1", n)
	}
}

// TestDrainDuringSlowDial: SIGTERM while a session's dial hangs (the upstream
// accepted TCP and never answers the handshake, TETHER_DIAL_TIMEOUT is a
// minute) ends at once, with exit 0.
func TestDrainDuringSlowDial(t *testing.T) {
	const drain = time.Second
	url, requests := silentUpstream(t)
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":  url,
		"TETHER_DIAL_TIMEOUT":  "1m",
		"TETHER_ACCEPT_WAIT":   "0s", // accept the app while the dial hangs
		"TETHER_DRAIN_TIMEOUT": drain.String(),
	})
	app := dialTestApp(t, r.appURL)
	select {
	case <-requests: // the upgrade request was sent: the dial waits for its answer
	case <-time.After(waitLimit):
		t.Fatalf("no upstream dial within %v", waitLimit)
	}
	checkPromptDrain(t, r, app, drain)
}

// TestReadyzFlipsWhenDrainStarts: /readyz answers 503 and tether_draining is
// 1 from the start of the drain, while apps are still being closed one by
// one over TETHER_DRAIN_TIMEOUT.
func TestReadyzFlipsWhenDrainStarts(t *testing.T) {
	// The second app is closed drain/2 after the first: that is the window
	// the checks below must fit in, so it is wide enough for a loaded
	// machine's scrape.
	const drain = 6 * time.Second
	up := newTestUpstream(t, upstreamtest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":  up.URL(),
		"TETHER_DRAIN_TIMEOUT": drain.String(),
	})
	apps := []*testApp{dialTestApp(t, r.appURL), dialTestApp(t, r.appURL)}
	awaitMetric(t, r.adminURL, "tether_sessions", map[string]string{"listener": "ws"}, 2)
	if code, body := get(t, r.adminURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q before the drain, want 200", code, body)
	}
	if v := value(scrape(t, r.adminURL), "tether_draining", nil); v != 0 {
		t.Fatalf("tether_draining = %v before the drain, want 0", v)
	}

	start := time.Now()
	r.cancel()
	// The first app is closed at once, the second drain/2 later: in between
	// the drain is under way and the admin server still answers.
	first := make(chan int, len(apps))
	for _, a := range apps {
		go func() {
			ev := <-a.msgs
			a.msgs <- ev
			first <- ev.closed
		}()
	}
	if code := <-first; code != 1001 {
		t.Fatalf("first app closed with %d, want 1001", code)
	}
	if code, body := get(t, r.adminURL+"/readyz"); code != http.StatusServiceUnavailable || body != "draining" {
		t.Errorf("/readyz = %d %q during the drain, want 503 draining", code, body)
	}
	if v := value(scrape(t, r.adminURL), "tether_draining", nil); v != 1 {
		t.Errorf("tether_draining = %v during the drain, want 1", v)
	}
	// The checks count only if a session was still open when they ended:
	// the second app not closed yet.
	select {
	case <-first:
		t.Fatalf("the second app was closed before the checks ended (%v after the drain started; due at %v): not during the drain", time.Since(start), drain/2)
	default:
	}
	<-first
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Errorf("serveProxy = %v, want nil", err)
		}
	case <-time.After(drain + drainSlack):
		t.Fatalf("drain not finished within %v", drain+drainSlack)
	}
	for _, a := range apps {
		a.expectClose(t, 1001)
	}
}

// TestSIGTERMDuringSlowDial runs the real binary: SIGTERM while the only
// session's upstream handshake hangs exits with code 0 within the drain bound.
func TestSIGTERMDuringSlowDial(t *testing.T) {
	const drain = time.Second
	bin := buildTether(t)
	url, requests := silentUpstream(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"TETHER_UPSTREAM_URL=" + url,
		"TETHER_LISTEN=127.0.0.1:0",
		"TETHER_ADMIN_LISTEN=off",
		"TETHER_DIAL_TIMEOUT=1m",
		"TETHER_ACCEPT_WAIT=0s",
		"TETHER_DRAIN_TIMEOUT=" + drain.String(),
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := bufio.NewReader(stderr)
	addr := startedAddr(t, logs)
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, logs); close(copied) }() // ends at exit
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op once it exited
		<-copied
	})

	app := dialTestApp(t, "ws://"+addr+"/")
	select {
	case <-requests:
	case <-time.After(waitLimit):
		t.Fatalf("no upstream dial within %v", waitLimit)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	app.expectClose(t, 1001)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tether exit after SIGTERM during a dial: %v, want exit 0", err)
	}
	if took := time.Since(start); took > drain+drainSlack {
		t.Errorf("exit took %v after SIGTERM, want ≤ %v", took, drain+drainSlack)
	}
}

// TestDrainDuringFirstDial: SIGTERM while an app's handshake waits for the
// first upstream dial (TETHER_ACCEPT_WAIT=30s, the upstream accepted TCP and
// never answers) answers that handshake 503 at once, instead of holding it
// for the whole drain deadline and then upgrading it to a socket that dies
// without a close frame, and tether exits 0 within the drain timeout.
func TestDrainDuringFirstDial(t *testing.T) {
	const drain = 2 * time.Second
	url, requests := silentUpstream(t)
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":  url,
		"TETHER_DIAL_TIMEOUT":  "1m",
		"TETHER_ACCEPT_WAIT":   "30s",
		"TETHER_DRAIN_TIMEOUT": drain.String(),
	})
	dialed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		conn, _, _, err := ws.Dialer{}.Dial(ctx, r.appURL)
		if conn != nil {
			_ = conn.Close()
		}
		dialed <- err
	}()
	select {
	case <-requests: // the app's handshake now waits for this dial
	case <-time.After(waitLimit):
		t.Fatalf("no upstream dial within %v", waitLimit)
	}
	took, err := r.stop(t)
	if err != nil {
		t.Errorf("serveProxy after cancel = %v, want nil (exit code %d, want 0)", err, exitCode(err, testWriter{t}))
	}
	if took > drain+drainSlack {
		t.Errorf("drain took %v, want ≤ TETHER_DRAIN_TIMEOUT %v + %v", took, drain, drainSlack)
	}
	var se ws.StatusError
	if err := <-dialed; !errors.As(err, &se) || int(se) != http.StatusServiceUnavailable {
		t.Errorf("app handshake during the drain: %v, want HTTP 503", err)
	}
	if n := r.logs.FilterMessage("app handshake refused").FilterField(zap.String("reason", "draining")).Len(); n != 1 {
		t.Errorf("%d handshakes refused as draining, want 1", n)
	}
}
