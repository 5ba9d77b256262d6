package upstreamtest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	// testTimeout bounds anything that should happen promptly on loopback;
	// it is only reached when a test fails.
	testTimeout = 5 * time.Second
	// quiet is how long a test watches for traffic that must not arrive:
	// loopback delivers in microseconds, so 100ms of silence is conclusive.
	quiet = 100 * time.Millisecond
)

func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Logf = t.Logf
	s, err := NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newProxy(t *testing.T, target string) *FaultProxy {
	t.Helper()
	p, err := NewFaultProxy(target)
	if err != nil {
		t.Fatalf("NewFaultProxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// nextConn returns the next connection the server accepted.
func nextConn(t *testing.T, s *Server) *Conn {
	t.Helper()
	select {
	case c := <-s.Conns():
		return c
	case <-time.After(testTimeout):
		t.Fatal("no connection accepted")
		return nil
	}
}

// client is the minimal gobwas client the tests drive the server with.
type client struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader // what Dial had buffered after the 101, or nil
	r    io.Reader     // br's buffered bytes first, then the socket
	hs   ws.Handshake
}

func tryDial(t *testing.T, url string, d ws.Dialer) (*client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, br, hs, err := d.Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	// A test that hangs is a failing test: bound every read and write.
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	c := &client{t: t, conn: conn, br: br, r: conn, hs: hs}
	if br != nil {
		c.r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)
	}
	return c, nil
}

func dial(t *testing.T, url string, d ws.Dialer) *client {
	t.Helper()
	c, err := tryDial(t, url, d)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return c
}

func (c *client) send(op ws.OpCode, data []byte) {
	c.t.Helper()
	if err := ws.WriteFrame(c.conn, ws.MaskFrame(ws.NewFrame(op, true, data))); err != nil {
		c.t.Fatalf("client write %v: %v", op, err)
	}
}

func (c *client) sendClose(code int, reason string) {
	c.t.Helper()
	c.send(ws.OpClose, ws.NewCloseFrameBody(ws.StatusCode(code), reason))
}

func (c *client) frame() (ws.Frame, error) {
	return ReadFrame(c.r, 64<<20)
}

func (c *client) mustFrame() ws.Frame {
	c.t.Helper()
	f, err := c.frame()
	if err != nil {
		c.t.Fatalf("client read frame: %v", err)
	}
	return f
}

// message reads one whole data message with wsutil (which reassembles
// fragments and answers control frames itself).
func (c *client) message() (ws.OpCode, []byte) {
	c.t.Helper()
	data, op, err := wsutil.ReadServerData(struct {
		io.Reader
		io.Writer
	}{c.r, c.conn})
	if err != nil {
		c.t.Fatalf("client read message: %v", err)
	}
	return op, data
}

// expectSilence asserts that nothing arrives for quiet, then restores the
// test deadline. A timeout that hits before any byte leaves the stream intact.
func (c *client) expectSilence() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(quiet))
	f, err := c.frame()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("expected silence, got frame %v %q, err %v", f.Header.OpCode, f.Payload, err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
}

// expectReset asserts that the next read fails because the peer reset the
// connection (ECONNRESET; on systems other than Linux EOF is accepted too).
func (c *client) expectReset() {
	c.t.Helper()
	_, err := c.frame()
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if runtime.GOOS != "linux" && errors.Is(err, io.EOF) {
		return
	}
	c.t.Fatalf("expected connection reset, got %v", err)
}

// expectEOF asserts that the peer closed TCP cleanly.
func (c *client) expectEOF() {
	c.t.Helper()
	if f, err := c.frame(); !errors.Is(err, io.EOF) {
		c.t.Fatalf("expected EOF, got frame %v %q, err %v", f.Header.OpCode, f.Payload, err)
	}
}

func waitDone(t *testing.T, c *Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(testTimeout):
		t.Fatalf("conn %d not done", c.N())
	}
}
