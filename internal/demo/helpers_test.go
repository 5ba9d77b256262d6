package demo

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// testTimeout bounds every wait in these tests; none is expected to come
// close to it.
const testTimeout = 10 * time.Second

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// wsNarrator and sseNarrator narrate to w in the WebSocket and the SSE
// demo's words, on the real clock.
func wsNarrator(w io.Writer) *narrator {
	return newNarrator(w, time.Now, demoSettings, false, webSocketMode().words)
}

func sseNarrator(w io.Writer) *narrator {
	return newNarrator(w, time.Now, demoSettings, false, sseMode().words)
}

// faultOf returns the entry of m's repertoire for kind.
func faultOf(t *testing.T, m mode, kind faultKind) fault {
	t.Helper()
	for _, f := range m.repertoire {
		if f.kind == kind {
			return f
		}
	}
	t.Fatalf("no fault of kind %d in the repertoire", kind)
	return fault{}
}

// eventually polls cond, for state another goroutine updates with no event
// to wait on, bounded by testTimeout.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("condition not met within %v", testTimeout)
		}
	}
}

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// peer is a bare gobwas client for checking the feed frame by frame.
type peer struct {
	t    *testing.T
	conn net.Conn
	r    io.Reader
}

// refusal is a handshake the server refused.
type refusal struct {
	status     int
	retryAfter string
}

// dialPeer connects to url, or returns the refusal.
func dialPeer(t *testing.T, url string) (*peer, *refusal) {
	t.Helper()
	var ref *refusal
	d := ws.Dialer{
		Timeout: testTimeout,
		OnStatusError: func(status int, _ []byte, resp io.Reader) {
			ref = &refusal{status: status}
			if r, err := http.ReadResponse(bufio.NewReader(resp), nil); err == nil {
				ref.retryAfter = r.Header.Get("Retry-After")
			}
		},
	}
	conn, br, _, err := d.Dial(context.Background(), url)
	if ref != nil {
		return nil, ref
	}
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := &peer{t: t, conn: conn, r: conn}
	if br != nil {
		p.r = io.MultiReader(br, conn)
	}
	return p, nil
}

// frame reads the next frame.
func (p *peer) frame() (ws.Frame, error) {
	_ = p.conn.SetReadDeadline(time.Now().Add(testTimeout))
	return upstreamtest.ReadFrame(p.r, 64<<20)
}

// text reads frames until a text message and returns it.
func (p *peer) text() string {
	p.t.Helper()
	for {
		f, err := p.frame()
		if err != nil {
			p.t.Fatalf("read: %v", err)
		}
		if f.Header.OpCode == ws.OpText {
			return string(f.Payload)
		}
	}
}

// send writes one masked frame.
func (p *peer) send(op ws.OpCode, payload string) {
	p.t.Helper()
	if err := ws.WriteFrame(p.conn, ws.MaskFrame(ws.NewFrame(op, true, []byte(payload)))); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// closeFrame reads until a close frame and returns its code and reason.
func (p *peer) closeFrame() (ws.StatusCode, string) {
	p.t.Helper()
	for {
		f, err := p.frame()
		if err != nil {
			p.t.Fatalf("read until close: %v", err)
		}
		if f.Header.OpCode == ws.OpClose {
			code, reason := ws.ParseCloseFrameData(f.Payload)
			// Echo, as RFC 6455 section 5.5.1 asks; the server waits for it.
			echo := ws.MaskFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))
			_ = ws.WriteFrame(p.conn, echo) // the server may have given up waiting
			return code, reason
		}
	}
}

// lineWriter hands each line the narrator writes to the test.
type lineWriter struct{ lines chan string }

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 4096)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if l != "" {
			w.lines <- l
		}
	}
	return len(p), nil
}

// waitFor returns the first line containing substr, failing the test after
// testTimeout; every line read on the way is returned too.
func (w *lineWriter) waitFor(t *testing.T, substr string) (string, []string) {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case l := <-w.lines:
			seen = append(seen, l)
			if strings.Contains(l, substr) {
				return l, seen
			}
		case <-timer.C:
			t.Fatalf("no line containing %q; saw:\n%s", substr, strings.Join(seen, ""))
			return "", nil
		}
	}
}
