package wsconn

import "io"

// waitReader buffers a socket whose descriptor tether cannot wait on: a TLS
// connection (the descriptor's bytes are records, not the plaintext), and
// every socket off Unix. Like sockReader it holds a buffer only while bytes
// wait in it. It waits for a burst with a one-byte read into the reader
// itself, and borrows a buffer only once that byte has arrived, for the
// rest of what arrived with it.
//
// The read after that first byte may wait too, holding the buffer, but only
// for bytes the caller needs before it can go on: every Read asks for no
// more than that (Conn's reader interface), and one asking for a single
// byte gets it without a buffer. So a message is never held back waiting
// for the next one, and only a peer in the middle of a frame makes a
// connection hold a buffer while it waits, as on a plain socket. Only the
// connection's reader uses it.
type waitReader struct {
	c    *Conn
	src  io.Reader // the socket, after what the handshake read
	one  [1]byte
	buf  *rbuf // nil while idle
	r, w int   // unread bytes are buf.b[r:w]
	err  error // the read that filled the buffer failed after it: returned once it is drained
}

// Read returns buffered bytes, or reads: straight into p when p is at least
// a buffer's size (a large payload is not copied twice) or a single byte,
// into a borrowed buffer otherwise.
func (s *waitReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.r == s.w {
		if s.err != nil {
			return 0, s.err
		}
		s.stop() // what it held was read in place, and the caller has moved on
		if len(p) == 1 || len(p) >= readBufferSize {
			return s.read(p)
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

// fill waits for a byte without a buffer, then borrows one for it and for
// what else has arrived (or arrives first). It is called with nothing
// buffered: a buffer still held was read in place, and goes back first.
func (s *waitReader) fill() error {
	if s.err != nil {
		return s.err
	}
	s.stop()
	if _, err := s.read(s.one[:]); err != nil {
		return err
	}
	s.buf = s.c.borrow()
	s.buf.b[0] = s.one[0]
	n, err := s.read(s.buf.b[1:])
	s.r, s.w, s.err = 0, 1+n, err
	return nil
}

// read reads from the socket, noting the time when bytes arrive: evidence
// that the peer is alive, taken once per read rather than once per frame.
func (s *waitReader) read(p []byte) (int, error) {
	n, err := s.src.Read(p)
	if n > 0 {
		s.c.lastRead.Store(monotonic())
		return n, nil // an error comes back with the next read
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return 0, err
}

func (s *waitReader) buffered() []byte {
	if s.buf == nil {
		return nil
	}
	return s.buf.b[s.r:s.w]
}

func (s *waitReader) consume(n int) { s.r += n }

func (s *waitReader) stop() {
	if s.buf != nil {
		s.c.giveBack(s.buf)
		s.buf, s.r, s.w = nil, 0, 0
	}
}
