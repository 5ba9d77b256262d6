package wsconn

import (
	"bytes"
	"compress/flate"
	"errors"
	"io"
	"sync"

	"github.com/gobwas/ws"
)

// Deflate is the permessage-deflate extension (RFC 7692) as negotiated for
// one connection: which messages get inflated and how, which get
// compressed. The upstream package negotiates it; Conn only applies it.
type Deflate struct {
	// PeerNoContextTakeover: the peer compresses every message on its own
	// (server_no_context_takeover, for a client), so each one is inflated
	// without the previous ones. Otherwise the last 32 KiB that were
	// inflated are the next message's dictionary (RFC 7692 §7.2.2), which
	// the connection keeps from its first compressed message on.
	PeerNoContextTakeover bool
	// Compress sends data messages of at least CompressMinBytes compressed,
	// each on its own (no context takeover on tether's side, which the
	// extension always allows, so no compressor is held per connection).
	// False when the peer limits tether's window below the 32 KiB that
	// compress/flate always uses (client_max_window_bits < 15): messages
	// are then sent uncompressed, which the extension allows too.
	Compress bool
}

// CompressMinBytes is the smallest message Send compresses. Compressing a
// message on its own builds Huffman tables for it, some 20-50 µs of CPU
// whatever its size (BenchmarkCompress), for a few hundred bytes saved
// below this size: not worth it for the small requests apps send.
const CompressMinBytes = 512

// compressLevel is flate.BestSpeed: tether's messages to the upstream are
// compressed once each, without context, on the sending goroutine.
const compressLevel = flate.BestSpeed

// windowBytes is the LZ77 window of permessage-deflate at most (2^15,
// RFC 7692 §7.1.2.1): what context takeover keeps.
const windowBytes = 32 << 10

// syncTail is what a sender removes from the end of each message
// (RFC 7692 §7.2.1): the empty stored block of a sync flush. The reader
// puts it back.
var syncTail = []byte{0x00, 0x00, 0xff, 0xff}

// rsv1 is the RSV1 bit as gobwas' ws.Header.Rsv holds it: "compressed".
const rsv1 = 0x4

// inflater is the reader state of a connection with Deflate set.
//
// With context takeover the peer's messages are one deflate stream, each
// ending with a sync flush, and the inflater reads them so: fr is the
// connection's own decompressor, fed one message at a time, which keeps
// its window from message to message at no cost. compress/flate has no
// way to say "this input ends here, more will come": reading past a
// message's end is a sticky error. The loop in readStream stops as soon
// as the message is consumed, which is before that read in all but one
// case: when the message's final flush has nothing new to hand over (an
// empty message, or output that ended exactly where the window wrapped).
// fr then reads on, meets errMessageEnd and is dead; hist, the last 32 KiB
// inflated, restarts it for the next message. hist costs one copy of each
// message; restarting from a dictionary on every message, as without the
// stream, cost a 32 KiB copy each (12 µs a message in BenchmarkReadDeflate).
//
// Without context takeover each message is inflated on its own by a
// decompressor from a shared pool.
//
// The output goes to a buffer borrowed for the message and given back at
// the next read (dropMessage), or to one of its own for a message that
// outgrows it. What context takeover keeps (fr and hist) is the stream's
// state, not a buffer: it counts on Options.Account for the connection's
// life (takeoverBytes).
type inflater struct {
	src    messageSource
	fr     io.ReadCloser // context takeover: the connection's own
	stale  bool          // fr met errMessageEnd: restart it from hist
	hist   history
	outBuf *rbuf // the last message's output buffer, while borrowed
}

// takeoverBytes is what context takeover keeps per connection: hist's
// window and fr, a compress/flate decompressor, whose own window and
// Huffman tables come to 40,574 bytes with Go 1.26 (TestTakeoverBytes).
const takeoverBytes = windowBytes + 41<<10

// messageSource is one message's compressed bytes for a decompressor:
// an io.ByteReader, so flate reads it without buffering ahead, that
// answers errMessageEnd past the end.
type messageSource struct {
	b []byte
	i int
}

var errMessageEnd = errors.New("wsconn: end of the compressed message")

func (s *messageSource) reset(b []byte) { s.b, s.i = b, 0 }
func (s *messageSource) done() bool     { return s.i == len(s.b) }

func (s *messageSource) ReadByte() (byte, error) {
	if s.i == len(s.b) {
		return 0, errMessageEnd
	}
	s.i++
	return s.b[s.i-1], nil
}

func (s *messageSource) Read(p []byte) (int, error) {
	if s.i == len(s.b) {
		return 0, errMessageEnd
	}
	n := copy(p, s.b[s.i:])
	s.i += n
	return n, nil
}

// flateReaders are the decompressors of connections without context
// takeover, shared: one is needed only while a message is inflated.
var flateReaders = sync.Pool{New: func() any { return flate.NewReader(&messageSource{}) }}

// flateWriters are shared by every connection: a compressor is some 600
// KiB, far too much to keep per upstream connection.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(io.Discard, compressLevel) // the level is valid
	return w
}}

// inflate decompresses msg, the reassembled payload of a compressed
// message, into the connection's output buffer, at most MaxMessageBytes:
// one more is a 1009, so a deflate bomb costs the limit in memory and no
// more. msg's buffer is the connection's to append to.
func (c *Conn) inflate(msg []byte) ([]byte, error) {
	z := c.inflater
	if z == nil {
		z = &inflater{}
		c.inflater = z
	}
	z.src.reset(append(msg, syncTail...))
	if z.outBuf == nil {
		z.outBuf = c.borrow()
	}
	var out []byte
	var err error
	if c.opts.Deflate.PeerNoContextTakeover {
		fr := flateReaders.Get().(io.ReadCloser)
		_ = fr.(flate.Resetter).Reset(&z.src, nil) // cannot fail: src is a ByteReader
		out, err = readStream(fr, &z.src, z.outBuf.b[:0], c.opts.MaxMessageBytes)
		flateReaders.Put(fr)
		if errors.Is(err, errMessageEnd) {
			err = nil // the pooled decompressor is reset for every message
		}
	} else {
		out, err = c.inflateStream(z)
	}
	if cap(out) != cap(z.outBuf.b) {
		// It outgrew the borrowed buffer, into one of its own: that one
		// counts by its size until the message is handed over.
		c.giveBack(z.outBuf)
		z.outBuf = nil
		c.assembled(int64(len(out)))
	}
	switch {
	case errors.Is(err, errTooLarge):
		return nil, c.protocolError(ws.StatusMessageTooBig, "message exceeds the size limit once inflated")
	case err != nil:
		return nil, c.protocolError(ws.StatusInvalidFramePayloadData, "invalid compressed data")
	}
	return out, nil
}

// inflateStream reads the next message of a context takeover stream.
func (c *Conn) inflateStream(z *inflater) ([]byte, error) {
	switch {
	case z.fr == nil:
		z.fr = flate.NewReader(&z.src)
		c.held.take(takeoverBytes) // until the connection ends
	case z.stale:
		_ = z.fr.(flate.Resetter).Reset(&z.src, z.hist.bytes())
		z.stale = false
	}
	out, err := readStream(z.fr, &z.src, z.outBuf.b[:0], c.opts.MaxMessageBytes)
	if errors.Is(err, errMessageEnd) {
		// The message is whole (all of it was read); fr is not.
		z.stale, err = true, nil
	}
	if err == nil {
		z.hist.add(out)
	}
	return out, err
}

var errTooLarge = errors.New("too large")

// readStream reads r's output for the message in src into out, growing it
// as bytes come, and stops once src is consumed: then the decompressor has
// read the message's final sync flush and handed over what it flushed,
// since out always has room for a whole window (the most a flush holds).
// It fails with errTooLarge past limit bytes.
func readStream(r io.Reader, src *messageSource, out []byte, limit int64) ([]byte, error) {
	for {
		room := int(min(windowBytes+1, limit+1-int64(len(out)))) // at most one byte past the limit
		if cap(out)-len(out) < room {
			out = grow(out, max(room, cap(out)))[:len(out)]
		}
		end := len(out) + room
		n, err := r.Read(out[len(out):end])
		out = out[:len(out)+n]
		switch {
		case int64(len(out)) > limit:
			return out, errTooLarge
		case err != nil:
			return out, err
		case src.done():
			return out, nil
		}
	}
}

// history is the last windowBytes inflated on a connection, as a ring.
type history struct {
	ring []byte
	pos  int // where the next byte goes
	full bool
}

func (h *history) add(p []byte) {
	if h.ring == nil {
		h.ring = make([]byte, windowBytes)
	}
	if len(p) >= windowBytes {
		copy(h.ring, p[len(p)-windowBytes:])
		h.pos, h.full = 0, true
		return
	}
	n := copy(h.ring[h.pos:], p)
	if n < len(p) {
		h.pos = copy(h.ring, p[n:])
		h.full = true
		return
	}
	h.pos += n
	if h.pos == windowBytes {
		h.pos, h.full = 0, true
	}
}

// bytes returns the history in order, in a new slice (only a restart
// needs it).
func (h *history) bytes() []byte {
	if !h.full {
		return append([]byte(nil), h.ring[:h.pos]...)
	}
	return append(append(make([]byte, 0, windowBytes), h.ring[h.pos:]...), h.ring[:h.pos]...)
}

// compressed is one message compressed for sending, in a pooled buffer.
type compressed struct {
	b []byte
}

// maxCompressedBuffer keeps one huge message from pinning its buffer in
// the pool.
const maxCompressedBuffer = 256 << 10

var compressedPool = sync.Pool{New: func() any { return &compressed{} }}

// compress returns p compressed on its own (RFC 7692 §7.2.1: deflate,
// flushed, the final 0x00 0x00 0xff 0xff removed), or nil when that would
// not be smaller. The caller puts the result back with release.
func compress(p []byte) *compressed {
	out := compressedPool.Get().(*compressed)
	buf := bytes.NewBuffer(out.b[:0])
	fw := flateWriters.Get().(*flate.Writer)
	fw.Reset(buf)
	_, err := fw.Write(p)
	if err == nil {
		err = fw.Flush()
	}
	flateWriters.Put(fw)
	out.b = buf.Bytes()
	if err != nil || len(out.b) < 4 || len(out.b)-4 >= len(p) {
		out.release()
		return nil
	}
	out.b = out.b[:len(out.b)-4]
	return out
}

func (c *compressed) release() {
	if cap(c.b) > maxCompressedBuffer {
		c.b = nil
	}
	compressedPool.Put(c)
}
