//go:build unix

package sendq

import (
	"net"
	"os"
	"syscall"
)

// RawWriter writes a plain socket without ever waiting: one write(2) at a
// time, which takes what the socket has room for. An owner whose caller
// writes what it queued itself, on its own thread, rather than waking a
// writer goroutine on another, writes through it, so that the caller never
// parks on a slow peer: what the socket does not take goes to the owner's
// writer goroutine. A RawWriter is used by one goroutine at a time (the
// owner's writer of the moment).
type RawWriter struct {
	nc  net.Conn
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // w.write, bound once so a write allocates nothing
	b   []byte
	n   int
	err error
}

// NewRawWriter returns nil unless nc is a plain TCP or unix socket. A raw
// write skips nc.Write, so any other type, one that wraps a socket and
// gives its descriptor included, may do what a raw write would leave out:
// TLS records, a count, a test's stall.
func NewRawWriter(nc net.Conn) *RawWriter {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &RawWriter{nc: nc, rc: rc}
	w.fn = w.write
	return w
}

// TryWrite writes what of b the socket takes now, and returns how much:
// none when the socket is full. err is the failure of the write(2) itself,
// as net.Conn.Write would have returned it. ok is false when the socket
// could not be written at all (closed, or past its write deadline): the
// writer goroutine's own write then meets what stopped this one, and
// reports it as it always did.
func (w *RawWriter) TryWrite(b []byte) (n int, ok bool, err error) {
	w.b, w.n, w.err = b, 0, nil
	rerr := w.rc.Write(w.fn)
	w.b = nil
	if rerr != nil {
		return 0, false, nil
	}
	if w.err != nil {
		return 0, true, &net.OpError{Op: "write", Net: w.nc.LocalAddr().Network(),
			Source: w.nc.LocalAddr(), Addr: w.nc.RemoteAddr(), Err: os.NewSyscallError("write", w.err)}
	}
	return w.n, true, nil
}

// write runs with the descriptor and returns true whatever write(2) did,
// EAGAIN included: the runtime would otherwise park the caller until the
// socket is writable.
func (w *RawWriter) write(fd uintptr) bool {
	for {
		n, err := syscall.Write(int(fd), w.b)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
		case err != nil:
			w.err = err
		default:
			w.n = n
		}
		return true
	}
}
