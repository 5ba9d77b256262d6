package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
)

// ---- a server on several listeners ----

// multiEnv is a proxy.Server serving one listener of each kind asked for:
// TCP listeners on 127.0.0.1:0, unix sockets in the test's temporary
// directory.
type multiEnv struct {
	srv  *proxy.Server
	addr map[proxy.ListenerKind]string // host:port, or the socket path for unix
}

// wsURL is the URL a WebSocket app dials on the ws listener.
func (e *multiEnv) wsURL() string { return "ws://" + e.addr[proxy.ListenerWS] + "/" }

func newMultiTether(t *testing.T, upstreamURL string, mutate func(*proxy.Options), kinds ...proxy.ListenerKind) *multiEnv {
	t.Helper()
	opts := baseOptions(t, upstreamURL, newStateRecorder())
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := proxy.New(opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	e := &multiEnv{srv: srv, addr: map[proxy.ListenerKind]string{}}
	served := make(chan error, len(kinds))
	for _, kind := range kinds {
		ln := listen(t, kind)
		e.addr[kind] = ln.Addr().String()
		go func() { served <- srv.ServeKind(ln, kind) }()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx, 0); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		for range kinds {
			if err := <-served; err != nil {
				t.Errorf("ServeKind: %v", err)
			}
		}
	})
	return e
}

func listen(t *testing.T, kind proxy.ListenerKind) net.Listener {
	t.Helper()
	network, addr := "tcp", "127.0.0.1:0"
	if kind == proxy.ListenerUnix {
		network, addr = "unix", filepath.Join(t.TempDir(), "t.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	return ln
}

// ---- a WebSocket app on a unix socket ----

// dialAppVia is tryDialApp over a socket of any network ("unix" with a
// socket path, or "tcp"): url gives only the Host header and the path;
// header adds request headers (Origin).
func dialAppVia(t *testing.T, network, address, url string, header http.Header) (*app, refusal, error) {
	t.Helper()
	var ref refusal
	d := ws.Dialer{
		Timeout: testTimeout,
		Header:  ws.HandshakeHeaderHTTP(header),
		NetDial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, address)
		},
		OnStatusError: func(status int, _ []byte, resp io.Reader) {
			ref.status = status
			if r, err := http.ReadResponse(bufio.NewReader(resp), nil); err == nil {
				b, _ := io.ReadAll(r.Body)
				_ = r.Body.Close()
				ref.body = string(b)
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, br, hs, err := d.Dial(ctx, url)
	if err != nil {
		return nil, ref, err
	}
	a := &app{
		conn: conn, protocol: hs.Protocol,
		msgs: make(chan appMsg, 1<<14), pongs: make(chan string, 16),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)
	}
	go a.readLoop(bufio.NewReader(r), appOptions{})
	t.Cleanup(func() {
		close(a.quit)
		_ = a.conn.Close()
		<-a.done
	})
	return a, ref, nil
}

// ---- a tcp:// app ----

// lineApp is a naive line-oriented app: one TCP socket, lines written with
// "\n", lines read with bufio.Reader.ReadString('\n').
type lineApp struct {
	conn  net.Conn
	lines chan string
	quit  chan struct{}
	done  chan struct{} // closed when the reader has ended

	mu      sync.Mutex
	readErr error  // why the reader ended (io.EOF when tether closed cleanly)
	partial string // bytes after the last newline when it ended
}

func dialLines(t *testing.T, addr string) *lineApp {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	a := &lineApp{conn: conn, lines: make(chan string, 1<<14), quit: make(chan struct{}), done: make(chan struct{})}
	go a.readLoop()
	t.Cleanup(func() {
		close(a.quit)
		_ = conn.Close()
		<-a.done
	})
	return a
}

// readLoop reads lines until the socket ends; then the app closes its
// socket, as a program reading lines does at the end of its input.
func (a *lineApp) readLoop() {
	defer close(a.done)
	r := bufio.NewReader(a.conn)
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			a.mu.Lock()
			a.readErr, a.partial = err, s
			a.mu.Unlock()
			_ = a.conn.Close()
			return
		}
		select {
		case a.lines <- strings.TrimSuffix(s, "\n"):
		case <-a.quit:
			return
		}
	}
}

// send writes raw bytes (lines with their terminators).
func (a *lineApp) send(t *testing.T, raw string) {
	t.Helper()
	if _, err := io.WriteString(a.conn, raw); err != nil {
		t.Fatalf("tcp app write: %v", err)
	}
}

// next returns the next line tether wrote.
func (a *lineApp) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-a.lines:
		return s
	case <-a.done:
		select {
		case s := <-a.lines:
			return s
		default:
		}
		t.Fatalf("tcp app socket ended while waiting for a line: %s", a.endState())
	case <-time.After(testTimeout):
		t.Fatalf("tcp app got no line within %v", testTimeout)
	}
	return ""
}

func (a *lineApp) expectLine(t *testing.T, want string) {
	t.Helper()
	if got := a.next(t); got != want {
		t.Fatalf("tcp app read %q, want %q", got, want)
	}
}

// expectEOF waits for tether to close the socket cleanly, after every line
// it wrote was read, and fails if any line is left unread.
func (a *lineApp) expectEOF(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(within):
		t.Fatalf("tcp app socket still open after %v", within)
	}
	a.mu.Lock()
	err, partial := a.readErr, a.partial
	a.mu.Unlock()
	if !errors.Is(err, io.EOF) || partial != "" {
		t.Fatalf("tcp app socket ended with %v after %q, want a clean EOF", err, partial)
	}
	select {
	case s := <-a.lines:
		t.Fatalf("tcp app has unexpected line %q before the EOF", s)
	default:
	}
}

func (a *lineApp) expectOpen(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
		t.Fatalf("tcp app socket closed: %s", a.endState())
	default:
	}
}

func (a *lineApp) endState() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return "read error " + errString(a.readErr) + ", partial line " + `"` + a.partial + `"`
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

// ---- one client interface for every transport ----

// feedClient is an app of any transport, seen as a stream of text messages.
type feedClient interface {
	sendText(t *testing.T, s string)
	nextText(t *testing.T) []byte
	expectOpen(t *testing.T)
}

type wsFeedClient struct{ a *app }

func (c wsFeedClient) sendText(t *testing.T, s string) { t.Helper(); c.a.sendText(t, s) }
func (c wsFeedClient) expectOpen(t *testing.T)         { t.Helper(); c.a.expectOpen(t) }
func (c wsFeedClient) nextText(t *testing.T) []byte {
	t.Helper()
	m := c.a.next(t)
	if m.op != ws.OpText || m.frames != 1 {
		t.Fatalf("app got %v %q in %d frames, want one text frame", m.op, m.data, m.frames)
	}
	return m.data
}

type lineFeedClient struct{ a *lineApp }

func (c lineFeedClient) sendText(t *testing.T, s string) { t.Helper(); c.a.send(t, s+"\n") }
func (c lineFeedClient) expectOpen(t *testing.T)         { t.Helper(); c.a.expectOpen(t) }
func (c lineFeedClient) nextText(t *testing.T) []byte    { t.Helper(); return []byte(c.a.next(t)) }

// dialFeedClient connects an app of kind to e.
func dialFeedClient(t *testing.T, e *multiEnv, kind proxy.ListenerKind) feedClient {
	t.Helper()
	switch kind {
	case proxy.ListenerTCP:
		return lineFeedClient{dialLines(t, e.addr[kind])}
	case proxy.ListenerUnix:
		a, ref, err := dialAppVia(t, "unix", e.addr[kind], "ws://localhost/", nil)
		if err != nil {
			t.Fatalf("unix app handshake: %v (status %d, body %q)", err, ref.status, ref.body)
		}
		return wsFeedClient{a}
	}
	return wsFeedClient{dialApp(t, e.wsURL(), appOptions{})}
}

// seqUntil reads c's messages into v until event n, with seqView's checks.
func seqUntil(t *testing.T, v *seqView, c feedClient, n int64) {
	t.Helper()
	for v.last < n {
		seqTake(t, v, c.nextText(t))
	}
}

// seqTake is seqView.take for a message from any transport.
func seqTake(t *testing.T, v *seqView, raw []byte) {
	t.Helper()
	var m feedMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("app got %q: %v", raw, err)
	}
	switch m.T {
	case "welcome":
		v.welcomes++
		if v.welcomes > 1 || m.Resync {
			t.Fatalf("app got welcome #%d %s: it must see exactly one, never a resync", v.welcomes, raw)
		}
	case "snapshot":
		v.snapshots++
		v.last = m.At
	case "event":
		if m.Seq != v.last+1 {
			t.Fatalf("app got event %d after %d: gap or duplicate", m.Seq, v.last)
		}
		v.last = m.Seq
	case "subscribed":
	default:
		t.Fatalf("app got unexpected %s", raw)
	}
}

// ---- tests ----

// Every transport gets the same exactly-once stream across upstream faults:
// a WebSocket app on TCP, one on a unix socket and a raw TCP app reading
// lines each keep one socket while the upstream is reset, stalls half-open
// and restarts with 1012, and each sees one welcome and every event once,
// in order, each reconnect being one recovery by resume. Sessions and
// messages are counted under the app's listener kind.
func TestTransportsExactlyOnceAcrossFaults(t *testing.T) {
	for _, kind := range []proxy.ListenerKind{proxy.ListenerWS, proxy.ListenerUnix, proxy.ListenerTCP} {
		t.Run(string(kind), func(t *testing.T) {
			feed := newResumeFeed(t, 5000, feedEvery, false)
			m := newCounts()
			e := newMultiTether(t, feed.srv.URL(), resumeExample(t, m), kind)
			c := dialFeedClient(t, e, kind)
			c.sendText(t, sub("a"))
			var v seqView
			seqUntil(t, &v, c, 20)
			faults := []feedFault{faultReset, faultStall, faultRestart}
			// How soon the app catches up is TestResumeProtocolAcrossFaults'
			// concern; here it is what the app sees, whatever its transport.
			for _, f := range faults {
				f.apply(t, feed)
				r := feed.nextResume(t)
				if r.resync {
					t.Fatalf("%s: the feed answered with a snapshot although its buffer holds 5000 events", f.name)
				}
				seqUntil(t, &v, c, r.head+20)
			}
			c.expectOpen(t)
			if v.welcomes != 1 || v.snapshots != 0 {
				t.Errorf("app saw %d welcomes and %d snapshots, want 1 and 0", v.welcomes, v.snapshots)
			}
			m.await(t, "recovered resume", len(faults))
			if n := m.get("session started " + string(kind)); n != 1 {
				t.Errorf("%d sessions started on %s, want 1", n, kind)
			}
			if n := m.get("message app_to_upstream " + string(kind)); n != 1 {
				t.Errorf("%d app messages counted on %s, want the one subscription", n, kind)
			}
			if n := m.get("message upstream_to_app " + string(kind)); n < int(v.last) {
				t.Errorf("%d upstream messages counted on %s, want at least the %d events delivered", n, kind, v.last)
			}
		})
	}
}

// Several listeners of different kinds share one server: the same
// upstream, the same MaxSessions.
func TestListenersShareOneServer(t *testing.T) {
	up := newUpstream(t, upstreamConfig{onConn: echo})
	m := newCounts()
	e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.MaxSessions = 3
	}, proxy.ListenerWS, proxy.ListenerUnix, proxy.ListenerTCP)
	clients := map[proxy.ListenerKind]feedClient{}
	for _, kind := range []proxy.ListenerKind{proxy.ListenerWS, proxy.ListenerUnix, proxy.ListenerTCP} {
		c := dialFeedClient(t, e, kind)
		c.sendText(t, "hello from "+string(kind))
		if got := string(c.nextText(t)); got != "hello from "+string(kind) {
			t.Fatalf("%s app got %q, want its echo", kind, got)
		}
		clients[kind] = c
	}
	// A fourth app, of any kind, is over MaxSessions.
	extra := dialLines(t, e.addr[proxy.ListenerTCP])
	extra.expectEOF(t, testTimeout)
	m.await(t, "rejected "+labels.RejectMaxSessions, 1)
	for kind, c := range clients {
		c.expectOpen(t)
		if n := m.get("session started " + string(kind)); n != 1 {
			t.Errorf("%d sessions started on %s, want 1", n, kind)
		}
	}
	if n := up.srv.Handshakes(); n != 3 {
		t.Errorf("upstream saw %d handshakes, want 3 (the refused app must not dial)", n)
	}
}

// ServeKind refuses a kind it does not know, and closes the listener.
func TestServeKindUnknown(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	srv, err := proxy.New(baseOptions(t, up.srv.URL(), newStateRecorder()))
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, proxy.ListenerWS)
	if err := srv.ServeKind(ln, "quic"); err == nil {
		t.Error("ServeKind accepted the kind quic")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("listener after the refusal: Accept returned %v, want net.ErrClosed", err)
	}
	if err := srv.Shutdown(context.Background(), 0); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// A WebSocket app's message refused by a limit is counted under the same
// reasons as a line app's: too_large (1009) and invalid_utf8 (1007).
func TestWebSocketLimitDropsCounted(t *testing.T) {
	const limit = 64
	for _, tc := range []struct {
		name, msg, reason string
		code              ws.StatusCode
	}{
		{"too large", strings.Repeat("b", limit+1), labels.DropTooLarge, ws.StatusMessageTooBig},
		{"invalid utf-8", "\xc3\x28", labels.DropInvalidUTF8, ws.StatusInvalidFramePayloadData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{})
			m := newCounts()
			e := newMultiTether(t, up.srv.URL(), func(o *proxy.Options) {
				o.Metrics = m
				o.MaxMessageBytes = limit
			}, proxy.ListenerWS)
			a := dialApp(t, e.wsURL(), appOptions{})
			c := up.nextConn(t)
			a.sendText(t, tc.msg)
			cf := a.awaitEnd(t, testTimeout)
			if cf == nil || cf.code != tc.code {
				t.Fatalf("app closed with %+v, want %d", cf, tc.code)
			}
			expectUpstreamClosedWith(t, c, ws.StatusNormalClosure)
			up.expectNothingFromApp(t)
			m.await(t, "app dropped "+tc.reason, 1)
		})
	}
}
