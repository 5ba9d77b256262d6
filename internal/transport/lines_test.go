package transport

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/tetherproxy/tether/internal/loopback"
)

// lineTimeout bounds waits that should end promptly on loopback.
const lineTimeout = 5 * time.Second

// drops records the LineOptions callbacks.
type drops struct {
	mu        sync.Mutex
	reasons   []string
	delivered int
}

func (d *drops) dropped(r string) { d.mu.Lock(); d.reasons = append(d.reasons, r); d.mu.Unlock() }
func (d *drops) deliver()         { d.mu.Lock(); d.delivered++; d.mu.Unlock() }

func (d *drops) get() ([]string, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.reasons...), d.delivered
}

// newTestLineConn wraps the server end of a fresh pair; cleanup aborts it
// and waits for its writer.
func newTestLineConn(t *testing.T, opts LineOptions) (*LineConn, net.Conn, *drops) {
	t.Helper()
	server, client := loopback.Pair(t)
	d := &drops{}
	opts.Dropped, opts.Delivered = d.dropped, d.deliver
	c := NewLineConn(server, opts)
	t.Cleanup(func() {
		c.Abort()
		<-c.Done()
	})
	return c, client, d
}

// readAll reads what tether wrote until EOF, failing on any other end (a
// reset would mean tether destroyed lines the app had not read yet).
func readAll(t *testing.T, client net.Conn) string {
	t.Helper()
	_ = client.SetReadDeadline(time.Now().Add(lineTimeout))
	b, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("app read %q, then %v; want everything and then EOF", b, err)
	}
	return string(b)
}

func awaitDone(t *testing.T, c *LineConn, within time.Duration) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(within):
		t.Fatalf("tcp app socket not closed within %v", within)
	}
}

// What the reader returns for each input: lines end at \n or \r\n, a lone
// \r is text, empty lines are skipped, a line of exactly the limit passes
// and one byte more does not, wherever the reads split the input.
func TestLineReading(t *testing.T) {
	const max = 16
	full := strings.Repeat("x", max)
	tests := []struct {
		name  string
		input string
		want  []string
		err   string // "" for io.EOF; "too_large", "invalid_utf8", "unterminated"
	}{
		{"lf", "a\nbc\n", []string{"a", "bc"}, ""},
		{"crlf", "a\r\nbc\r\n", []string{"a", "bc"}, ""},
		{"mixed", "a\r\nb\nc\r\n", []string{"a", "b", "c"}, ""},
		{"lone cr is text", "a\rb\n\r\r\n", []string{"a\rb", "\r"}, ""},
		{"empty lines skipped", "\n\r\n\na\n\r\n", []string{"a"}, ""},
		{"utf-8", "café ☕\n", []string{"café ☕"}, ""},
		{"exactly the limit", full + "\n" + full + "\r\n", []string{full, full}, ""},
		{"one byte over", "ok\n" + full + "y\n", []string{"ok"}, DropTooLarge},
		{"one byte over with crlf", "ok\n" + full + "y\r\n", []string{"ok"}, DropTooLarge},
		{"far over without newline", strings.Repeat("z", 10*max), nil, DropTooLarge},
		{"invalid utf-8", "ok\n\xff\xfe\nnext\n", []string{"ok"}, DropInvalidUTF8},
		{"unterminated at EOF", "ok\npartial", []string{"ok"}, DropUnterminated},
		{"only a cr at EOF", "ok\n\r", []string{"ok"}, DropUnterminated},
	}
	for _, tc := range tests {
		for _, chunk := range []int{1, 3, 1 << 10} {
			t.Run(fmt.Sprintf("%s/chunks of %d", tc.name, chunk), func(t *testing.T) {
				c, client, _ := newTestLineConn(t, LineOptions{MaxLineBytes: max, CloseWait: 100 * time.Millisecond})
				goWriteChunks(t, client, tc.input, chunk)
				got, err := readLines(c)
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Errorf("chunks of %d: lines %q, want %q", chunk, got, tc.want)
				}
				if reason := endReason(err); reason != tc.err {
					t.Errorf("chunks of %d: reader ended with %v (%q), want %q", chunk, err, reason, tc.err)
				}
			})
		}
	}
}

// goWriteChunks writes s in pieces of n bytes from another goroutine, as
// an app would, then half-closes; cleanup waits for it.
func goWriteChunks(t *testing.T, nc net.Conn, s string, n int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(s) > 0 {
			k := min(n, len(s))
			if _, err := io.WriteString(nc, s[:k]); err != nil {
				return
			}
			s = s[k:]
		}
		_ = nc.(*net.TCPConn).CloseWrite()
	}()
	t.Cleanup(func() {
		_ = nc.Close()
		<-done
	})
}

func readLines(c *LineConn) ([]string, error) {
	var got []string
	for {
		op, data, err := c.ReadMessage()
		if err != nil {
			return got, err
		}
		if op != ws.OpText {
			return got, errors.New("not a text message")
		}
		got = append(got, string(data))
	}
}

// endReason names how a reader ended: "" for a clean EOF, or the Drop*
// reason.
func endReason(err error) string {
	var le *LineError
	var cut *PartialLineError
	switch {
	case errors.Is(err, io.EOF):
		return ""
	case errors.As(err, &le):
		return le.Drop
	case errors.As(err, &cut):
		return DropUnterminated
	}
	return err.Error()
}

// A long line grows the read buffer up to the limit, and the buffer is let
// go once the line is consumed, so one burst does not pin memory.
func TestLineBufferGrowsAndShrinks(t *testing.T) {
	const max = 1 << 20
	c, client, _ := newTestLineConn(t, LineOptions{MaxLineBytes: max})
	long := strings.Repeat("L", max)
	goWriteChunks(t, client, long+"\nshort\n", 64<<10)
	_, data, err := c.ReadMessage()
	if err != nil || string(data) != long {
		t.Fatalf("first line: %d bytes, %v; want the %d-byte line", len(data), err, max)
	}
	if len(c.rbuf) > max+2 {
		t.Errorf("read buffer grew to %d bytes for a %d-byte line, want at most %d", len(c.rbuf), max, max+2)
	}
	if _, data, err = c.ReadMessage(); err != nil || string(data) != "short" {
		t.Fatalf("second line: %q, %v", data, err)
	}
	if _, _, err = c.ReadMessage(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
	c.release()
	if len(c.rbuf) > maxRetainedLineBuffer {
		t.Errorf("read buffer still %d bytes once empty, want at most %d", len(c.rbuf), maxRetainedLineBuffer)
	}
}

// A line over the limit closes the app: the lines tether queued before are
// all delivered, then EOF (not a reset, although the app still had bytes
// in flight), and the socket is closed.
func TestLineTooLongClosesAfterFlush(t *testing.T) {
	const max = 64
	c, client, _ := newTestLineConn(t, LineOptions{MaxLineBytes: max, CloseWait: time.Second})
	for _, m := range []string{"one", "two"} {
		if err := c.Send(context.Background(), ws.OpText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	// Far more than the limit, most of it unread by tether when it closes;
	// the app does not half-close, so tether's drain lasts CloseWait.
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		_, _ = io.WriteString(client, strings.Repeat("x", 256<<10)+"\n")
	}()
	defer func() { <-writing }()
	_, _, err := c.ReadMessage()
	if endReason(err) != DropTooLarge {
		t.Fatalf("reader ended with %v, want a too-long line", err)
	}
	var le *LineError
	if errors.As(err, &le) && le.Code != ws.StatusMessageTooBig {
		t.Errorf("close code %d, want 1009", le.Code)
	}
	if got := readAll(t, client); got != "one\ntwo\n" {
		t.Errorf("app read %q, want the two queued lines", got)
	}
	awaitDone(t, c, time.Second+time.Second)
	if err := c.Send(context.Background(), ws.OpText, []byte("late")); !errors.Is(err, ErrLineClosed) {
		t.Errorf("Send after the close: %v, want ErrLineClosed", err)
	}
}

// Upstream messages become lines: text as is, binary and line breaks by
// policy. A drop is counted and leaves the stream intact; close delivers
// what was queued, then ends the socket, and later messages are refused
// without being counted as drops again.
func TestLineWriting(t *testing.T) {
	bin := []byte{0, 1, '\n', 0xfe, 0xff}
	b64 := base64.StdEncoding.EncodeToString(bin)
	type msg struct {
		op   ws.OpCode
		data string
	}
	tests := []struct {
		name      string
		binary    BinaryPolicy
		newline   NewlinePolicy
		send      []msg
		want      string
		dropped   []string
		delivered int
		closed    bool // Send of the last message reports the close
	}{
		{"text", BinaryBase64, NewlineSpace, []msg{{ws.OpText, "a"}, {ws.OpText, `{"x":1}`}}, "a\n{\"x\":1}\n", nil, 2, false},
		{"empty text", BinaryBase64, NewlineSpace, []msg{{ws.OpText, ""}, {ws.OpText, "b"}}, "\nb\n", nil, 2, false},
		{"binary base64", BinaryBase64, NewlineSpace, []msg{{ws.OpBinary, string(bin)}, {ws.OpText, "after"}}, b64 + "\nafter\n", nil, 2, false},
		{"binary drop", BinaryDrop, NewlineSpace, []msg{{ws.OpText, "before"}, {ws.OpBinary, string(bin)}, {ws.OpText, "after"}}, "before\nafter\n", []string{DropBinary}, 2, false},
		{"binary close", BinaryClose, NewlineSpace, []msg{{ws.OpText, "before"}, {ws.OpBinary, string(bin)}, {ws.OpBinary, "again"}}, "before\n", []string{DropBinary}, 1, true},
		{"newline space", BinaryBase64, NewlineSpace, []msg{{ws.OpText, "{\"a\":\n1,\r\n\"b\":2}"}}, "{\"a\": 1,  \"b\":2}\n", nil, 1, false},
		{"lone cr space", BinaryBase64, NewlineSpace, []msg{{ws.OpText, "a\rb"}}, "a b\n", nil, 1, false},
		{"newline drop", BinaryBase64, NewlineDrop, []msg{{ws.OpText, "a\nb"}, {ws.OpText, "c"}}, "c\n", []string{DropNewline}, 1, false},
		{"newline close", BinaryBase64, NewlineClose, []msg{{ws.OpText, "before"}, {ws.OpText, "a\r\nb"}, {ws.OpText, "late"}}, "before\n", []string{DropNewline}, 1, true},
		{"newline policy leaves binary alone", BinaryBase64, NewlineClose, []msg{{ws.OpBinary, "\n"}}, "Cg==\n", nil, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, client, d := newTestLineConn(t, LineOptions{Binary: tc.binary, Newline: tc.newline, CloseWait: 100 * time.Millisecond})
			var last error
			for _, m := range tc.send {
				last = c.Send(context.Background(), m.op, []byte(m.data))
			}
			if tc.closed != errors.Is(last, ErrLineClosed) {
				t.Errorf("last Send: %v, closed %v", last, tc.closed)
			}
			if !tc.closed {
				if last != nil {
					t.Fatalf("last Send: %v", last)
				}
				c.Close(ws.StatusNormalClosure, "")
			}
			if got := readAll(t, client); got != tc.want {
				t.Errorf("app read %q, want %q", got, tc.want)
			}
			awaitDone(t, c, time.Second+time.Second)
			reasons, delivered := d.get()
			if strings.Join(reasons, ",") != strings.Join(tc.dropped, ",") || delivered != tc.delivered {
				t.Errorf("dropped %v and delivered %d, want %v and %d", reasons, delivered, tc.dropped, tc.delivered)
			}
		})
	}
}

// The queue towards a tcp app that does not read stays within QueueBytes:
// Send blocks (here until its context ends) instead of buffering more.
func TestLineBackPressure(t *testing.T) {
	const queue = 64 << 10
	c, client, _ := newTestLineConn(t, LineOptions{QueueBytes: queue})
	line := []byte(strings.Repeat("p", 1023)) // 1 KiB with its newline
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		for {
			if err := c.Send(ctx, ws.OpText, line); err != nil {
				sent <- err
				return
			}
		}
	}()
	// The kernel's buffers take what they can, then the queue fills up.
	deadline := time.Now().Add(lineTimeout)
	for c.Queued() < queue-int64(len(line)) {
		if time.Now().After(deadline) {
			t.Fatalf("queue at %d bytes after %v, never near its %d-byte bound", c.Queued(), lineTimeout, queue)
		}
		select {
		case err := <-sent:
			t.Fatalf("Send failed while filling: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if q := c.Queued(); q > queue {
		t.Errorf("queue holds %d bytes, over its %d-byte bound", q, queue)
	}
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Errorf("blocked Send returned %v, want context.Canceled", err)
	}
	// Everything queued still reaches an app that starts reading.
	c.Close(ws.StatusNormalClosure, "")
	got := readAll(t, client)
	if len(got)%(len(line)+1) != 0 || strings.Trim(got, "p\n") != "" {
		t.Errorf("app read %d bytes that are not whole lines", len(got))
	}
}

// Close bounds its wait for an app that neither reads nor closes: the socket
// is closed within CloseWait.
func TestLineCloseWaitBound(t *testing.T) {
	const closeWait = 200 * time.Millisecond
	c, client, _ := newTestLineConn(t, LineOptions{CloseWait: closeWait})
	start := time.Now()
	c.Close(ws.StatusGoingAway, "tether shutting down")
	awaitDone(t, c, closeWait+time.Second)
	if d := time.Since(start); d < closeWait/2 {
		t.Errorf("closed after %v, before the app had CloseWait (%v) to close its side", d, closeWait)
	}
	// The app sees the end of the stream.
	r := bufio.NewReader(client)
	_ = client.SetReadDeadline(time.Now().Add(lineTimeout))
	if _, err := r.ReadByte(); err == nil {
		t.Error("app read a byte after the close, want EOF")
	}
}

// An app that closes its side when it sees EOF lets the close finish at
// once, not after CloseWait.
func TestLineCloseAnsweredEarly(t *testing.T) {
	const closeWait = 5 * time.Second
	c, client, _ := newTestLineConn(t, LineOptions{CloseWait: closeWait})
	reading := make(chan struct{})
	go func() { // the session's reader
		defer close(reading)
		_, _ = readLines(c)
	}()
	defer func() { <-reading }()
	start := time.Now()
	c.Close(ws.StatusNormalClosure, "")
	_ = readAll(t, client)
	_ = client.Close()
	awaitDone(t, c, closeWait/2)
	if d := time.Since(start); d >= closeWait/2 {
		t.Errorf("close took %v although the app closed at once", d)
	}
}

func TestPolicyNames(t *testing.T) {
	for _, name := range []string{"base64", "drop", "close"} {
		var p BinaryPolicy
		if err := p.UnmarshalText([]byte(name)); err != nil || p.String() != name {
			t.Errorf("binary policy %q: parsed %v, %v", name, p, err)
		}
	}
	for _, name := range []string{"space", "drop", "close"} {
		var p NewlinePolicy
		if err := p.UnmarshalText([]byte(name)); err != nil || p.String() != name {
			t.Errorf("newline policy %q: parsed %v, %v", name, p, err)
		}
	}
	for _, bad := range []string{"", "Base64", "space", "hex"} {
		if _, err := ParseBinaryPolicy(bad); err == nil {
			t.Errorf("ParseBinaryPolicy(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "base64", "escape"} {
		if _, err := ParseNewlinePolicy(bad); err == nil {
			t.Errorf("ParseNewlinePolicy(%q) accepted", bad)
		}
	}
	if BinaryPolicy(0) != BinaryBase64 || NewlinePolicy(0) != NewlineSpace {
		t.Error("zero policies are not the documented defaults (base64, space)")
	}
}
