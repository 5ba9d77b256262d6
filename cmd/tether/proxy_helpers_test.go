package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// waitLimit bounds waits for what must happen promptly on loopback; it is
// only reached when a test fails.
const waitLimit = 10 * time.Second

// running is serveProxy running in the test process, as `tether` runs it,
// with its app and admin addresses and its log entries.
type running struct {
	appURL   string
	adminURL string
	logs     *observer.ObservedLogs
	cancel   context.CancelFunc // what SIGTERM does in main
	done     chan error         // serveProxy's result
}

// startProxy runs serveProxy with env on top of loopback listeners on free
// ports, a 1s drain and no heartbeat. Cleanup stops it if the test did not.
func startProxy(t *testing.T, env map[string]string) *running {
	t.Helper()
	full := map[string]string{
		"TETHER_LISTEN":         "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":   "127.0.0.1:0",
		"TETHER_DRAIN_TIMEOUT":  "1s",
		"TETHER_PING_INTERVAL":  "0",
		"TETHER_BACKOFF_BASE":   "20ms",
		"TETHER_BACKOFF_CAP":    "200ms",
		"TETHER_BACKOFF_JITTER": "none",
	}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := config.Load(full)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Core()))
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{logs: logs, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan net.Addr, 1)
	go func() { r.done <- serveProxy(ctx, cfg, log, ready) }()
	select {
	case addr := <-ready:
		r.appURL = "ws://" + addr.String() + "/"
	case err := <-r.done:
		cancel()
		t.Fatalf("serveProxy: %v", err)
	case <-time.After(waitLimit):
		t.Fatalf("serveProxy not listening within %v", waitLimit)
	}
	// Logged before the app listener is announced.
	if admin := logs.FilterMessage("admin server listening").All(); len(admin) == 1 {
		r.adminURL = fmt.Sprintf("http://%s", admin[0].ContextMap()["addr"])
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitLimit):
			t.Errorf("serveProxy still running %v after cancel", waitLimit)
		}
	})
	return r
}

// stop cancels the context and returns how long serveProxy took to return,
// and its result.
func (r *running) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		return time.Since(start), err
	case <-time.After(waitLimit):
		t.Fatalf("serveProxy still running %v after cancel", waitLimit)
		return 0, nil
	}
}

// awaitLog waits until a log entry with msg was recorded.
func (r *running) awaitLog(t *testing.T, msg string) {
	t.Helper()
	eventually(t, fmt.Sprintf("log %q", msg), func() bool { return r.logs.FilterMessage(msg).Len() > 0 })
}

// eventually polls cond until it holds, bounded by waitLimit. For state with
// no event to wait on (a metric, a log entry written by another goroutine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
	}
}

// ---- the app ----

// testApp is a naive app: one WebSocket connection to tether. Its reader
// goroutine answers pings and close frames (wsutil does) and reports each
// message, then the close code, on msgs.
type testApp struct {
	conn net.Conn
	msgs chan appEvent
	wg   sync.WaitGroup
}

type appEvent struct {
	data   string
	closed int // close code; 0 for a data message, -1 for a socket error
}

func dialTestApp(t *testing.T, url string) *testApp {
	t.Helper()
	return dialTestAppWith(t, ws.Dialer{}, url)
}

// dialTestAppWith dials url with d, whose NetDial may lead elsewhere than
// url's host (a unix socket).
func dialTestAppWith(t *testing.T, d ws.Dialer, url string) *testApp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, br, _, err := d.Dial(ctx, url)
	if err != nil {
		t.Fatalf("app dial: %v", err)
	}
	// Messages tether forwarded right behind its 101 may sit in br.
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)
	}
	a := &testApp{conn: conn, msgs: make(chan appEvent, 1024)}
	a.wg.Add(1)
	go a.read(struct {
		io.Reader
		io.Writer
	}{r, conn})
	t.Cleanup(func() {
		_ = conn.Close()
		a.wg.Wait()
	})
	return a
}

func (a *testApp) read(rw io.ReadWriter) {
	defer a.wg.Done()
	for {
		data, err := wsutil.ReadServerText(rw)
		if err != nil {
			code := -1
			if ce, ok := err.(wsutil.ClosedError); ok {
				code = int(ce.Code)
			}
			a.msgs <- appEvent{closed: code}
			return
		}
		a.msgs <- appEvent{data: string(data)}
	}
}

func (a *testApp) send(t *testing.T, text string) {
	t.Helper()
	if err := wsutil.WriteClientText(a.conn, []byte(text)); err != nil {
		t.Fatalf("app send %q: %v", text, err)
	}
}

// expect fails unless the app's next message is want.
func (a *testApp) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case ev := <-a.msgs:
		if ev.closed != 0 || ev.data != want {
			t.Fatalf("app got %+v, want message %q", ev, want)
		}
	case <-time.After(waitLimit):
		t.Fatalf("app did not receive %q within %v", want, waitLimit)
	}
}

// expectClose fails unless the app's next event is a close frame with code.
func (a *testApp) expectClose(t *testing.T, code int) {
	t.Helper()
	select {
	case ev := <-a.msgs:
		if ev.closed != code {
			t.Fatalf("app got %+v, want close %d", ev, code)
		}
	case <-time.After(waitLimit):
		t.Fatalf("app not closed within %v", waitLimit)
	}
}

// close ends the app's connection with a close frame, as a polite app does.
func (a *testApp) close(t *testing.T) {
	t.Helper()
	if err := ws.WriteFrame(a.conn, ws.MaskFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))); err != nil {
		t.Fatalf("app close: %v", err)
	}
}

// ---- the upstream ----

func newTestUpstream(t *testing.T, opts upstreamtest.Options) *upstreamtest.Server {
	t.Helper()
	opts.Logf = t.Logf
	srv, err := upstreamtest.NewServer(opts)
	if err != nil {
		t.Fatalf("upstreamtest.NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// silentUpstream accepts TCP connections and reads whatever comes, never
// answering: a WebSocket handshake to it hangs. requests receives one value
// per connection once its first bytes (the upgrade request) were read.
func silentUpstream(t *testing.T) (url string, requests <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				first := true
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if first {
						first = false
						ch <- struct{}{}
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "ws://" + ln.Addr().String() + "/", ch
}

// ---- the admin server ----

// scrape fetches /metrics and parses the text exposition format.
func scrape(t *testing.T, adminURL string) map[string]*dto.MetricFamily {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: waitLimit}).Get(adminURL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// sample finds the series of name whose labels include want. ok is false
// when there is none.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := families[name]
	if !ok {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			return m, true
		}
	}
	return nil, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	matched := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			matched++
		}
	}
	return matched == len(want)
}

// value is a counter's or gauge's value (a histogram's sample count), 0 when
// the series does not exist.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m, ok := sample(families, name, labels)
	switch {
	case !ok:
		return 0
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// awaitMetric scrapes until the series equals want (counters that go past
// it never come back, and the wait fails with the last value seen).
func awaitMetric(t *testing.T, adminURL, name string, labels map[string]string, want float64) map[string]*dto.MetricFamily {
	t.Helper()
	var families map[string]*dto.MetricFamily
	last := -1.0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		families = scrape(t, adminURL)
		if last = value(families, name, labels); last == want {
			return families
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s%v = %v after %v, want %v", name, labels, last, waitLimit, want)
		}
	}
}
