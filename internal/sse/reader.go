package sse

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// DefaultMaxEventSize is the MaxEventSize used when Options leaves it 0.
const DefaultMaxEventSize = 1 << 20

// readSize is the size of a Reader's read buffer. A line longer than that
// is assembled in a separate, MaxEventSize-bounded buffer.
const readSize = 4096

// maxEmptyReads is how many reads in a row may return nothing before Next
// gives up on the source, as bufio does.
const maxEmptyReads = 100

// Options configure a Reader. The zero value is ready to use.
type Options struct {
	// MaxEventSize bounds, in bytes, both the length of one line and the
	// data of one event (the decoded values of its "data" lines plus one
	// LF each). Exceeding it stops the Reader with a *TooLargeError.
	// Default DefaultMaxEventSize (1 MiB).
	MaxEventSize int

	// LastEventID is the last event ID string the stream starts from: the
	// value sent as Last-Event-ID when this stream was requested. It also
	// seeds the last event ID buffer, as browsers do, so a resumed stream
	// whose events carry no "id" keeps it instead of resetting it to ""
	// at the first blank line (see the package documentation).
	LastEventID string

	// Held, when not nil, is told how the bytes of the event being parsed
	// change: a line that spans reads and the data lines of an event whose
	// blank line has not come yet, which a server can make as large as
	// MaxEventSize by sending slowly. It is called from Next's goroutine
	// with the change since its last call, before Next waits for more
	// bytes and before it returns; once Next has returned an error,
	// everything it counted has been given back (a negative change).
	Held func(delta int64)
}

// Reader parses an event stream from an io.Reader, one Item at a time.
// It reads only when it must, so an Item is returned as soon as the bytes
// that complete it have arrived. See the package documentation for the
// rules it follows.
type Reader struct {
	src       io.Reader
	max       int
	buf       []byte // read buffer; buf[r:w] is unparsed
	r, w      int
	line      []byte // a line that spans reads, assembled here
	started   bool   // the BOM check at the stream's start is done
	skipLF    bool   // the last line ended with CR: an LF next is part of it
	pendErr   error  // a read error held back until the bytes before it are parsed
	err       error  // sticky: Next returns it from now on
	data      []byte // the data buffer
	typ       []byte // the event type buffer
	id        []byte // the last event ID buffer
	lastID    string // the stream's last event ID string
	typeCache string // the last custom type returned, reused to save allocations
	retry     time.Duration
	hasRetry  bool
	held      func(int64) // Options.Held
	counted   int64       // what held was last told is held
}

// NewReader returns a Reader that parses the event stream read from src.
func NewReader(src io.Reader, opts Options) *Reader {
	limit := opts.MaxEventSize
	if limit <= 0 {
		limit = DefaultMaxEventSize
	}
	return &Reader{
		src:    src,
		max:    limit,
		buf:    make([]byte, readSize),
		id:     []byte(opts.LastEventID),
		lastID: opts.LastEventID,
		held:   opts.Held,
	}
}

// Next returns the next Item. At the end of the stream it returns io.EOF,
// discarding an event that its blank line never dispatched. A read error
// is returned wrapped; a line or event over MaxEventSize is a
// *TooLargeError. After an error, Next returns the same error forever.
func (r *Reader) Next() (Item, error) {
	for r.err == nil {
		line, ok, err := r.nextLine()
		if err != nil {
			r.err = err
			break
		}
		if !ok {
			r.count()
			r.err = r.fill()
			continue
		}
		it, emit, err := r.process(line)
		if err != nil {
			r.err = err
			break
		}
		if emit {
			r.count()
			return it, nil
		}
	}
	r.count()
	return Item{}, r.err
}

// count tells Options.Held what the event being parsed holds now: nothing
// once the Reader has stopped, since it will parse no more.
func (r *Reader) count() {
	if r.held == nil {
		return
	}
	n := int64(len(r.line) + len(r.data))
	if r.err != nil {
		n = 0
	}
	if d := n - r.counted; d != 0 {
		r.counted = n
		r.held(d)
	}
}

// LastEventID returns the stream's last event ID string: what the next
// request should send as Last-Event-ID (none when it is ""). It changes
// only when a blank line dispatches, never in the middle of a block.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the reconnection time from the latest valid "retry" field,
// and false when the stream has sent none.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

// nextLine returns the next complete line, without its line end, or false
// when the buffered bytes hold none. The line is only valid until the next
// call.
func (r *Reader) nextLine() ([]byte, bool, error) {
	if !r.started {
		return nil, false, nil
	}
	if r.skipLF && r.r < r.w {
		// CRLF is one line end even when a Read boundary splits it.
		if r.buf[r.r] == '\n' {
			r.r++
		}
		r.skipLF = false
	}
	chunk := r.buf[r.r:r.w]
	i := indexLineEnd(chunk)
	if i < 0 {
		r.r = r.w
		return nil, false, r.carry(chunk)
	}
	r.r += i + 1
	r.skipLF = chunk[i] == '\r'
	if len(r.line) == 0 {
		return chunk[:i], true, r.checkLine(i)
	}
	if err := r.carry(chunk[:i]); err != nil {
		return nil, false, err
	}
	line := r.line
	// The caller is done with line before the next call, so its memory
	// can be reused (unless oversized).
	r.line = reuse(r.line)
	return line, true, nil
}

// carry appends part of a line to the line buffer: the unterminated tail
// of the read buffer, so that buffer can be refilled from its start, or
// the end of a line whose start was carried before.
func (r *Reader) carry(part []byte) error {
	if err := r.checkLine(len(r.line) + len(part)); err != nil {
		return err
	}
	r.line = append(r.line, part...)
	return nil
}

func (r *Reader) checkLine(n int) error {
	if n > r.max {
		return &TooLargeError{Limit: r.max, Line: true}
	}
	return nil
}

// indexLineEnd returns the index of the first CR or LF in b, or -1.
func indexLineEnd(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

// fill reads more bytes into the buffer. Bytes that arrive together with
// an error are parsed before the error is reported.
func (r *Reader) fill() error {
	if r.pendErr != nil {
		return r.pendErr
	}
	if r.r == r.w {
		r.r, r.w = 0, 0
	}
	for tries := 0; tries < maxEmptyReads; tries++ {
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.pendErr = wrapReadErr(err)
		}
		if n > 0 {
			r.checkBOM(r.pendErr != nil)
			return nil
		}
		if err != nil {
			return r.pendErr
		}
	}
	return errNoProgress
}

func wrapReadErr(err error) error {
	if err == io.EOF {
		return io.EOF
	}
	return fmt.Errorf("sse: read stream: %w", err)
}

// checkBOM strips one byte order mark at the start of the stream. Until
// three bytes have arrived it may not know yet; ended says no more will.
func (r *Reader) checkBOM(ended bool) {
	if r.started {
		return
	}
	got := r.buf[r.r:r.w]
	n := min(len(got), len(bom))
	if !bytes.Equal(got[:n], []byte(bom[:n])) {
		r.started = true
		return
	}
	if n == len(bom) {
		r.r += n
		r.started = true
		return
	}
	// A proper prefix of the BOM with nothing to follow: no line end in
	// it, so it is an unterminated line and will be discarded anyway.
	r.started = ended
}
