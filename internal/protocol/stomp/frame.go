package stomp

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// MaxFrameBytes bounds one frame the Framer joins from several WebSocket
// messages: a peer that never ends its frame must not grow tether's memory
// without end.
const MaxFrameBytes = 16 << 20

// Errors of the Framer (Split's error wraps one of them).
var (
	// ErrContentLength: a content-length header that is not a number of
	// bytes, or a body of that length not followed by NUL (STOMP 1.2
	// "Header content-length").
	ErrContentLength = errors.New("stomp: bad content-length")
	// ErrFrameTooLarge: a frame longer than MaxFrameBytes.
	ErrFrameTooLarge = errors.New("stomp: frame over MaxFrameBytes")
)

// framer splits the WebSocket messages of one direction into STOMP frames
// (STOMP 1.2 "STOMP Frames", "Augmented BNF"): a frame is a command line,
// header lines, a blank line and a body that ends with NUL, or after
// content-length bytes with the NUL that follows them. Each protocol
// message is either one frame and the EOLs right behind it in the same
// WebSocket message, or a run of EOLs alone: heart-beats (STOMP 1.2
// "Heart-beating"). A frame cut across WebSocket messages is joined. It is
// used by one goroutine.
type framer struct {
	carry protocol.Carry // the start of a frame the messages so far left incomplete
	out   [][]byte       // the output, reused
	// nulFrom is where the search for the carried frame's NUL resumes.
	nulFrom int
}

func newFramer() protocol.Framer { return &framer{} }

// Split returns the frames and heart-beats data completes.
func (f *framer) Split(_ ws.OpCode, data []byte) ([][]byte, error) {
	f.out = f.out[:0]
	buf, wait := f.carry.Join(data)
	if wait {
		return f.out, nil
	}
	from := f.nulFrom
	f.nulFrom = 0
	for len(buf) > 0 {
		n, hint, err := next(buf, from)
		from = 0
		if err != nil {
			return f.out, err
		}
		if n == 0 {
			if len(buf) > MaxFrameBytes || hint.need > MaxFrameBytes+1 {
				return f.out, fmt.Errorf("%w: %d bytes and not complete", ErrFrameTooLarge, max(len(buf), hint.need))
			}
			f.carry.Keep(buf, hint.need)
			f.nulFrom = hint.nulFrom
			break
		}
		f.out = append(f.out, buf[:n])
		buf = buf[n:]
	}
	return f.out, nil
}

// incomplete says when an incomplete frame is worth reading again: once
// the buffer holds need bytes, searching for the body's NUL from nulFrom.
type incomplete struct{ need, nulFrom int }

// next returns the length of the protocol message buf starts with, or 0
// when buf holds only part of it. from, when positive, is where an earlier
// call left off searching for the NUL of this frame's body.
func next(buf []byte, from int) (int, incomplete, error) {
	if n, done := eols(buf); n > 0 || !done {
		return n, incomplete{}, nil // heart-beats, or a CR that may start one
	}
	body, length, ok, err := headerEnd(buf)
	switch {
	case err != nil:
		return 0, incomplete{}, err
	case !ok:
		return 0, incomplete{}, nil // the headers are not all there
	case body < 0: // a NUL inside the headers ends a frame the peer will refuse
		return trailing(buf, -body), incomplete{}, nil
	}
	var end int
	if length >= 0 {
		end = body + length
		if end >= len(buf) {
			return 0, incomplete{need: end + 1}, nil
		}
		if buf[end] != 0 {
			return 0, incomplete{}, fmt.Errorf("%w: %d body bytes not followed by NUL", ErrContentLength, length)
		}
	} else {
		i := bytes.IndexByte(buf[max(body, from):], 0)
		if i < 0 {
			return 0, incomplete{nulFrom: len(buf)}, nil
		}
		end = max(body, from) + i
	}
	return trailing(buf, end+1), incomplete{}, nil
}

// eols returns the length of the run of EOLs (LF or CR LF) buf starts
// with; done is false when buf ends in a CR that the next byte may make an
// EOL.
func eols(buf []byte) (n int, done bool) {
	for n < len(buf) {
		switch {
		case buf[n] == '\n':
			n++
		case buf[n] == '\r' && n+1 == len(buf):
			return n, n > 0
		case buf[n] == '\r' && buf[n+1] == '\n':
			n += 2
		default:
			return n, true
		}
	}
	return n, true
}

// trailing extends a frame ending at end over the complete EOLs that
// follow it in buf.
func trailing(buf []byte, end int) int {
	n, _ := eols(buf[end:])
	return end + n
}

// headerEnd finds the blank line that ends buf's command and headers: body
// is where the body starts, length the first content-length header's value
// (-1 when none). ok is false when the blank line is not in buf yet. A NUL
// before it ends the frame there: body is then minus the frame's length.
func headerEnd(buf []byte) (body, length int, ok bool, err error) {
	length = -1
	seenLength := false
	for line, i := 0, 0; ; line++ {
		j := bytes.IndexByte(buf[i:], '\n')
		seg := buf[i:]
		if j >= 0 {
			seg = seg[:j]
		}
		if nul := bytes.IndexByte(seg, 0); nul >= 0 {
			return -(i + nul + 1), -1, true, nil
		}
		if j < 0 {
			return 0, 0, false, nil
		}
		l := bytes.TrimSuffix(buf[i:i+j], []byte{'\r'})
		i += j + 1
		if line > 0 && len(l) == 0 {
			return i, length, true, nil
		}
		if line == 0 || seenLength {
			continue
		}
		if v, isLength := bytes.CutPrefix(l, []byte("content-length:")); isLength {
			seenLength = true // the first of repeated headers counts (STOMP 1.2 "Repeated Header Entries")
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 || n > MaxFrameBytes {
				return 0, 0, false, fmt.Errorf("%w: %q", ErrContentLength, v)
			}
			length = n
		}
	}
}
