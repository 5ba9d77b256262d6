//go:build unix

package wsconn

import (
	"net"
	"os"
	"syscall"
)

// rawWriter makes a plain socket's inline writes (writeNow): one write(2)
// each, which takes what the socket has room for and never waits for more,
// so the goroutine that makes it is never parked on a slow peer.
type rawWriter struct {
	nc  net.Conn
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // w.write, bound once so a write allocates nothing
	b   []byte
	n   int
	err error
}

// newRawWriter returns nil when nc does not expose its descriptor (TLS,
// whose records only crypto/tls can write).
func newRawWriter(nc net.Conn) *rawWriter {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &rawWriter{nc: nc, rc: rc}
	w.fn = w.write
	return w
}

// tryWrite writes what of b the socket takes now. err is the failure of
// the write(2) itself, as net.Conn.Write would have returned it. ok is
// false when the socket could not be written at all (closed, or a deadline
// has passed): the writer goroutine's own write then meets what stopped
// this one and reports it as it always did.
func (w *rawWriter) tryWrite(b []byte) (n int, ok bool, err error) {
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
func (w *rawWriter) write(fd uintptr) bool {
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
