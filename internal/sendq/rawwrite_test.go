//go:build unix

package sendq

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, with testTimeout
// as their deadline, so a write that waits fails the test instead of
// hanging it.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		_ = a.Close()
		t.Fatal(err)
	}
	for _, c := range []net.Conn{a, b} {
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		t.Cleanup(func() { _ = c.Close() })
	}
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TryWrite takes what the socket has room for and returns, however full
// it is: against a peer that reads nothing it writes less and less, then
// nothing, and never waits (a write that waited would meet the sockets'
// deadline and fail). What it wrote arrives whole, in order.
func TestRawWriterNeverWaits(t *testing.T) {
	a, b := tcpPair(t)
	_ = a.SetWriteBuffer(16 << 10)
	_ = b.SetReadBuffer(16 << 10)
	w := NewRawWriter(a)
	if w == nil {
		t.Fatal("no RawWriter for a *net.TCPConn")
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	var sent []byte
	for full := false; !full; {
		n, ok, err := w.TryWrite(msg)
		if !ok || err != nil {
			t.Fatalf("TryWrite: ok %v, err %v", ok, err)
		}
		sent = append(sent, msg[:n]...)
		full = n == 0
	}
	if len(sent) == 0 || len(sent) >= 64<<20 {
		t.Fatalf("%d bytes taken by a socket nobody reads", len(sent))
	}
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("the bytes read are not the bytes written")
	}
}

// A write the kernel refuses is the write's error, as net.Conn.Write
// returns it; a socket closed here cannot be written at all (ok false),
// which the owner's writer goroutine then meets itself; and a type that
// wraps a socket gets no RawWriter.
func TestRawWriterFailures(t *testing.T) {
	a, b := tcpPair(t)
	w := NewRawWriter(a)
	_ = b.SetLinger(0)
	_ = b.Close() // RST
	if _, err := a.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after the peer's reset: no error")
	}
	_, ok, err := w.TryWrite([]byte("x")) // the connection is gone: EPIPE
	if _, isOp := err.(*net.OpError); !ok || !isOp {
		t.Fatalf("TryWrite after the peer's reset: ok %v, err %T %v; want true, a *net.OpError", ok, err, err)
	}
	if NewRawWriter(struct{ *net.TCPConn }{a}) != nil {
		t.Fatal("a RawWriter for a type wrapping a socket: its Write would be skipped")
	}
	_ = a.Close()
	if _, ok, err := w.TryWrite([]byte("x")); ok || err != nil {
		t.Fatalf("after Close: ok %v, err %v; want false, nil", ok, err)
	}
}
