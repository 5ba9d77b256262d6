//go:build unix

package wsconn

import (
	"io"
	"net"
	"os"
	"syscall"
)

// sockReader buffers what a plain socket delivers, holding its buffer only
// while bytes wait in it or are arriving: between bursts the buffer goes back
// to a pool, so an idle connection costs no read buffer. It waits for data
// through the runtime's poller without a buffer (a read that finds nothing
// returns the buffer before the goroutine parks), which is what a blocked
// net.Conn.Read cannot do. Only the connection's reader uses it.
type sockReader struct {
	c     *Conn
	nc    net.Conn
	rc    syscall.RawConn
	fn    func(fd uintptr) bool // s.read, bound once so a read allocates nothing
	early []byte                // sent with the handshake response, read first
	buf   *rbuf                 // nil while idle
	r, w  int                   // unread bytes are buf.b[r:w]
	dst   []byte                // where read puts bytes: buf.b, or the caller's slice
	n     int
	err   error
}

// newSockReader returns nil when nc does not expose its descriptor (TLS).
// early holds bytes already read with the handshake.
func newSockReader(c *Conn, nc net.Conn, early []byte) reader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &sockReader{c: c, nc: nc, rc: rc, early: early}
	s.fn = s.read
	return s
}

// Read returns buffered bytes, or reads: straight into p when p is at least a
// buffer's size (a large payload is not copied twice), into the buffer
// otherwise.
func (s *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(s.early) > 0 {
		n := copy(p, s.early)
		s.early = s.early[n:]
		return n, nil
	}
	if s.r == s.w {
		if len(p) >= readBufferSize {
			return s.readInto(p)
		}
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf.b[s.r:s.w])
	s.r += n
	if s.r == s.w {
		s.stop() // all of it copied out: nothing refers to it any more
	}
	return n, nil
}

func (s *sockReader) buffered() []byte {
	if len(s.early) > 0 {
		return s.early
	}
	if s.buf == nil {
		return nil
	}
	return s.buf.b[s.r:s.w]
}

func (s *sockReader) consume(n int) {
	if len(s.early) > 0 {
		s.early = s.early[n:]
		return
	}
	s.r += n
}

func (s *sockReader) stop() {
	if s.buf != nil {
		s.c.giveBack(s.buf)
		s.buf, s.r, s.w = nil, 0, 0
	}
}

// fill reads into the (pooled) buffer, waiting for at least one byte.
func (s *sockReader) fill() error {
	s.r, s.w = 0, 0
	n, err := s.readInto(nil)
	s.w = n
	return err
}

// readInto reads into p, or into the buffer when p is nil.
func (s *sockReader) readInto(p []byte) (int, error) {
	s.dst, s.n, s.err = p, 0, nil
	err := s.rc.Read(s.fn)
	s.dst = nil
	if err == nil {
		err = s.err
	}
	if s.n > 0 {
		s.c.lastRead.Store(monotonic())
		return s.n, nil
	}
	if err == nil {
		err = io.EOF
	}
	return 0, err
}

// read runs with the descriptor. When nothing is there it gives the buffer
// back and returns false: the runtime parks the goroutine until the socket is
// readable and calls it again. A buffer taken for this read counts on the
// account only once bytes arrived in it: a read that finds nothing holds
// it for the length of a system call.
func (s *sockReader) read(fd uintptr) bool {
	dst := s.dst
	fresh := false
	if dst == nil {
		if s.buf == nil {
			s.buf, fresh = rbufPool.Get().(*rbuf), true
		}
		dst = s.buf.b
	}
	for {
		n, err := syscall.Read(int(fd), dst)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			s.dropBuf(fresh) // nothing waits in it: r == w
			return false
		case err != nil:
			s.dropBuf(fresh)
			s.err = &net.OpError{Op: "read", Net: s.nc.LocalAddr().Network(),
				Source: s.nc.LocalAddr(), Addr: s.nc.RemoteAddr(), Err: os.NewSyscallError("read", err)}
		case n == 0:
			s.dropBuf(fresh)
		default:
			if fresh {
				s.c.held.take(readBufferSize)
			}
			s.n = n
		}
		return true
	}
}

// dropBuf lets go of the buffer after a read that put nothing in it:
// back to the pool uncounted when the read took it, given back otherwise.
func (s *sockReader) dropBuf(fresh bool) {
	switch {
	case s.buf == nil:
	case fresh:
		rbufPool.Put(s.buf)
		s.buf = nil
	default:
		s.c.giveBack(s.buf)
		s.buf = nil
	}
}
