package nats

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Bounds of the Framer: a control line (an operation's first line: a
// CONNECT or an INFO with its JSON) and a payload joined across WebSocket
// messages. A peer that never ends one must not grow tether's memory
// without end.
const (
	MaxControlLine = 1 << 20
	MaxPayload     = 64 << 20
)

// Errors of the Framer (Split's error wraps one of them).
var (
	// ErrSize: the size of a PUB, HPUB, MSG or HMSG payload is not a
	// number, is over MaxPayload, or the payload is not followed by CRLF.
	ErrSize = errors.New("nats: bad payload size")
	// ErrLineTooLong: a control line over MaxControlLine.
	ErrLineTooLong = errors.New("nats: control line over MaxControlLine")
)

// framer splits the WebSocket messages of one direction into NATS
// operations (the client protocol): a control line ending in CRLF, and for
// PUB, HPUB, MSG and HMSG the payload of the size the line ends with and
// its CRLF. A WebSocket message may hold several operations, and one may
// span messages (the server packs and cuts them freely). It is used by one
// goroutine.
type framer struct {
	carry protocol.Carry
	out   [][]byte
}

func newFramer() protocol.Framer { return &framer{} }

// Split returns the operations data completes.
func (f *framer) Split(_ ws.OpCode, data []byte) ([][]byte, error) {
	f.out = f.out[:0]
	buf, wait := f.carry.Join(data)
	if wait {
		return f.out, nil
	}
	for len(buf) > 0 {
		n, need, err := next(buf)
		if err != nil {
			return f.out, err
		}
		if n == 0 {
			f.carry.Keep(buf, need)
			break
		}
		f.out = append(f.out, buf[:n])
		buf = buf[n:]
	}
	return f.out, nil
}

// next returns the length of the operation buf starts with, or 0 and the
// length buf must reach when it holds only part of it.
func next(buf []byte) (n, need int, err error) {
	eol := bytes.IndexByte(buf, '\n')
	if eol < 0 {
		if len(buf) > MaxControlLine {
			return 0, 0, fmt.Errorf("%w: %d bytes and no LF", ErrLineTooLong, len(buf))
		}
		return 0, len(buf) + 1, nil
	}
	line := buf[:eol+1]
	size, ok, err := payloadSize(line)
	if err != nil || !ok {
		return len(line), 0, err
	}
	end := len(line) + size + 2
	if len(buf) < end {
		return 0, end, nil
	}
	if buf[end-2] != '\r' || buf[end-1] != '\n' {
		return 0, 0, fmt.Errorf("%w: %d payload bytes not followed by CRLF", ErrSize, size)
	}
	return end, 0, nil
}

// payloadSize reads the payload size of a PUB, HPUB, MSG or HMSG control
// line: its last argument (the total size, for HPUB and HMSG). ok is false
// for an operation without payload. It allocates nothing: it runs for
// every operation of every message.
func payloadSize(line []byte) (size int, ok bool, err error) {
	name, rest := field(line)
	if !isPayloadOp(name) {
		return 0, false, nil
	}
	var last []byte
	n := 1
	for f, r := field(rest); len(f) > 0; f, r = field(r) {
		last, n = f, n+1
	}
	size, err = strconv.Atoi(string(last)) // no allocation: the conversion only feeds Atoi
	if err != nil || size < 0 || size > MaxPayload || n < 3 {
		return 0, false, fmt.Errorf("%w: %q", ErrSize, bytes.TrimSpace(line))
	}
	return size, true, nil
}

// isPayloadOp reports whether name (any case) is an operation with a
// payload.
func isPayloadOp(name []byte) bool {
	for _, op := range [...]string{"PUB", "MSG", "HPUB", "HMSG"} {
		if len(name) == len(op) && bytes.EqualFold(name, []byte(op)) {
			return true
		}
	}
	return false
}

// field returns the first field of b (separated by spaces, tabs, CR or
// LF) and what follows it.
func field(b []byte) (f, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
