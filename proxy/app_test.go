package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// app is the naive application of docs/design.md: a plain gobwas client that
// connects to tether once and never reconnects. Its reader is hand-rolled (one
// frame at a time) so the tests see exactly what tether put on the wire: how
// many frames a message took, whether a frame was masked, which close frame
// arrived. It answers pings and echoes a close frame, as any client library
// would (unless noEcho is set).
type app struct {
	conn     net.Conn
	protocol string // subprotocol in tether's handshake response

	wmu       sync.Mutex // one writer at a time: the test and the reader's replies
	closeSent bool

	msgs  chan appMsg
	pongs chan string
	quit  chan struct{} // closed by cleanup: the reader stops delivering
	done  chan struct{} // closed when the reader has ended (TCP closed)

	mu       sync.Mutex // guards the fields below, set before done closes
	close    *closeFrame
	readErr  error
	badFrame string // a frame tether must never send (masked, fragmented control)
}

// appMsg is one data message the app received, with the number of frames it
// came in.
type appMsg struct {
	op     ws.OpCode
	data   []byte
	frames int
}

type closeFrame struct {
	code   ws.StatusCode
	reason string
}

type appOptions struct {
	protocols []string
	noEcho    bool          // do not answer tether's close frame
	paused    chan struct{} // when set, the app reads nothing until it is closed
}

// refusal is what the app saw when tether refused its handshake.
type refusal struct {
	status int
	body   string
}

// dialApp connects an app and fails the test if the handshake does not succeed.
func dialApp(t *testing.T, url string, opts appOptions) *app {
	t.Helper()
	a, ref, err := tryDialApp(t, url, opts)
	if err != nil {
		t.Fatalf("app handshake: %v (status %d, body %q)", err, ref.status, ref.body)
	}
	return a
}

// tryDialApp performs the handshake; on refusal it returns the HTTP status and
// body tether answered with.
func tryDialApp(t *testing.T, url string, opts appOptions) (*app, refusal, error) {
	t.Helper()
	var ref refusal
	d := ws.Dialer{
		Protocols: opts.protocols,
		Timeout:   testTimeout,
		OnStatusError: func(status int, _ []byte, resp io.Reader) {
			ref.status = status
			r, err := http.ReadResponse(bufio.NewReader(resp), nil)
			if err != nil {
				return
			}
			defer r.Body.Close()
			b, _ := io.ReadAll(r.Body)
			ref.body = string(b)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, br, hs, err := d.Dial(ctx, url)
	if err != nil {
		return nil, ref, err
	}
	a := &app{
		conn:     conn,
		protocol: hs.Protocol,
		msgs:     make(chan appMsg, 1<<14),
		pongs:    make(chan string, 16),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	// Frames tether sent right behind its 101 may already sit in br.
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)
	}
	go a.readLoop(bufio.NewReader(r), opts)
	t.Cleanup(func() {
		close(a.quit)
		_ = a.conn.Close()
		<-a.done
	})
	return a, ref, nil
}

// readLoop reads frames until the socket ends.
func (a *app) readLoop(r *bufio.Reader, opts appOptions) {
	defer close(a.done)
	if opts.paused != nil {
		select {
		case <-opts.paused:
		case <-a.quit:
			return
		}
	}
	var (
		msg    []byte
		op     ws.OpCode
		frames int
	)
	for {
		h, payload, err := readFrame(r)
		if err != nil {
			a.setErr(err)
			return
		}
		if h.Masked || (h.OpCode.IsControl() && !h.Fin) {
			a.setBad("masked or fragmented control frame from tether")
		}
		switch h.OpCode {
		case ws.OpPing:
			_ = a.write(ws.OpPong, payload)
		case ws.OpPong:
			select {
			case a.pongs <- string(payload):
			default:
			}
		case ws.OpClose:
			a.gotClose(payload, opts.noEcho)
		default:
			if h.OpCode != ws.OpContinuation {
				op, msg, frames = h.OpCode, nil, 0
			}
			msg = append(msg, payload...)
			frames++
			if h.Fin && !a.deliver(appMsg{op: op, data: msg, frames: frames}) {
				return
			}
		}
	}
}

func readFrame(r io.Reader) (ws.Header, []byte, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return h, nil, err
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	return h, p, nil
}

func (a *app) deliver(m appMsg) bool {
	select {
	case a.msgs <- m:
		return true
	case <-a.quit:
		return false
	}
}

// gotClose records tether's close frame and, when tether started the closing
// handshake, answers it (RFC 6455 §5.5.1); tether then closes TCP.
func (a *app) gotClose(payload []byte, noEcho bool) {
	cf := &closeFrame{code: ws.StatusNoStatusRcvd}
	if len(payload) >= 2 {
		cf.code, cf.reason = ws.ParseCloseFrameData(payload)
	}
	a.mu.Lock()
	if a.close == nil {
		a.close = cf
	}
	a.mu.Unlock()
	if !noEcho {
		_ = a.writeClose(cf.code, "")
	}
}

func (a *app) setErr(err error) {
	a.mu.Lock()
	a.readErr = err
	a.mu.Unlock()
}

func (a *app) setBad(what string) {
	a.mu.Lock()
	a.badFrame = what
	a.mu.Unlock()
}

// write sends one masked frame.
func (a *app) write(op ws.OpCode, data []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.closeSent {
		return errors.New("app: close already sent")
	}
	return a.writeLocked(op, true, data)
}

func (a *app) writeLocked(op ws.OpCode, fin bool, data []byte) error {
	f := ws.NewFrame(op, fin, slices.Clone(data))
	return ws.WriteFrame(a.conn, ws.MaskFrameInPlace(f))
}

// writeClose sends the app's close frame once.
func (a *app) writeClose(code ws.StatusCode, reason string) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.closeSent {
		return nil
	}
	a.closeSent = true
	return a.writeLocked(ws.OpClose, true, ws.NewCloseFrameBody(code, reason))
}

// send writes one message as a single frame; it fails the test on error.
func (a *app) send(t *testing.T, op ws.OpCode, data string) {
	t.Helper()
	if err := a.write(op, []byte(data)); err != nil {
		t.Fatalf("app send %q: %v", data, err)
	}
}

func (a *app) sendText(t *testing.T, data string) { a.send(t, ws.OpText, data) }

// next returns the next message the app received.
func (a *app) next(t *testing.T) appMsg {
	t.Helper()
	select {
	case m := <-a.msgs:
		return m
	case <-a.done:
		// Messages that arrived before the end are still returned.
		select {
		case m := <-a.msgs:
			return m
		default:
		}
		t.Fatalf("app socket ended while waiting for a message: %s", a.endState())
	case <-time.After(testTimeout):
		t.Fatalf("app got no message within %v", testTimeout)
	}
	return appMsg{}
}

// expectText fails unless the next message is text with the given content.
func (a *app) expectText(t *testing.T, want string) {
	t.Helper()
	m := a.next(t)
	if m.op != ws.OpText || string(m.data) != want {
		t.Fatalf("app got %v %q, want text %q", m.op, m.data, want)
	}
}

// ping sends a ping and waits for tether's pong with the same payload.
func (a *app) ping(t *testing.T, payload string) {
	t.Helper()
	if err := a.write(ws.OpPing, []byte(payload)); err != nil {
		t.Fatalf("app ping: %v", err)
	}
	deadline := time.After(testTimeout)
	for {
		select {
		case p := <-a.pongs:
			if p == payload {
				return
			}
		case <-a.done:
			t.Fatalf("app socket ended while waiting for pong: %s", a.endState())
		case <-deadline:
			t.Fatalf("no pong for ping %q within %v", payload, testTimeout)
		}
	}
}

// awaitEnd waits for tether to end the app's socket and returns the close
// frame it sent (nil if TCP ended without one).
func (a *app) awaitEnd(t *testing.T, within time.Duration) *closeFrame {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(within):
		t.Fatalf("app socket still open after %v", within)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.close
}

// expectClosed fails unless tether closed the app with code and reason.
func (a *app) expectClosed(t *testing.T, within time.Duration, code ws.StatusCode, reason string) {
	t.Helper()
	cf := a.awaitEnd(t, within)
	if cf == nil {
		t.Fatalf("app socket ended without a close frame: %s", a.endState())
	}
	if cf.code != code || cf.reason != reason {
		t.Fatalf("app closed with %d %q, want %d %q", cf.code, cf.reason, code, reason)
	}
}

// closeNormally starts the app's closing handshake with 1000 and waits for
// tether to finish it.
func (a *app) closeNormally(t *testing.T) {
	t.Helper()
	if err := a.writeClose(ws.StatusNormalClosure, ""); err != nil {
		t.Fatalf("app close: %v", err)
	}
	cf := a.awaitEnd(t, testTimeout)
	if cf == nil || cf.code != ws.StatusNormalClosure {
		t.Fatalf("tether answered the app's close with %+v, want an echo of 1000", cf)
	}
}

// expectOpen fails if tether closed the app's socket or sent a frame it must
// not send.
func (a *app) expectOpen(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
		t.Fatalf("app socket closed: %s", a.endState())
	default:
	}
	a.mu.Lock()
	bad := a.badFrame
	a.mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
}

func (a *app) endState() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := "no close frame"
	if a.close != nil {
		s = fmt.Sprintf("close %d %q", a.close.code, a.close.reason)
	}
	if a.readErr != nil {
		s += ", read error: " + a.readErr.Error()
	}
	return s
}

// sendFragments writes one message as several frames (RFC 6455 §5.4).
func (a *app) sendFragments(t *testing.T, op ws.OpCode, parts ...string) {
	t.Helper()
	a.wmu.Lock()
	defer a.wmu.Unlock()
	for i, p := range parts {
		fop := ws.OpContinuation
		if i == 0 {
			fop = op
		}
		if err := a.writeLocked(fop, i == len(parts)-1, []byte(p)); err != nil {
			t.Fatalf("app send fragment %d: %v", i, err)
		}
	}
}
