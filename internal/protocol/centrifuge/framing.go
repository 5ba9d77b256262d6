package centrifuge

import (
	"bytes"
	"errors"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// ErrBinary is the Framer's error for a binary WebSocket message: the
// protobuf protocol, which the preset does not read.
var ErrBinary = errors.New("centrifuge: binary message (protobuf protocol): the preset reads the JSON protocol only")

// framer splits "\n"-separated commands or replies. It keeps nothing
// between messages: a command never spans WebSocket messages.
type framer struct {
	out [][]byte
}

func newFramer() protocol.Framer { return &framer{} }

// Split returns the non-empty lines of data, pointing into it.
func (f *framer) Split(op ws.OpCode, data []byte) ([][]byte, error) {
	if op == ws.OpBinary {
		return nil, ErrBinary
	}
	f.out = f.out[:0]
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		if line = bytes.TrimRight(line, "\r"); len(line) > 0 {
			f.out = append(f.out, line)
		}
		data = rest
	}
	return f.out, nil
}
