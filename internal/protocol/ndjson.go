package protocol

import (
	"bytes"
	"fmt"

	"github.com/gobwas/ws"
)

// FramingMode is TETHER_FRAMING: how the rules protocol finds its messages
// in WebSocket messages.
type FramingMode uint8

const (
	// FramingNone: one WebSocket message is one protocol message.
	FramingNone FramingMode = iota
	// FramingNDJSON: a text message holds one or more records separated by
	// '\n' (NDJSON; a record's trailing '\r' is dropped), each read, routed
	// and delivered as its own message: a Centrifugo client sends its
	// connect and subscribes in one message, and the server packs replies
	// the same way.
	FramingNDJSON
)

var framingNames = [...]string{"none", "ndjson"}

// String returns the TETHER_FRAMING spelling.
func (f FramingMode) String() string {
	if int(f) < len(framingNames) {
		return framingNames[f]
	}
	return fmt.Sprintf("FramingMode(%d)", f)
}

// UnmarshalText parses none or ndjson.
func (f *FramingMode) UnmarshalText(b []byte) error {
	for i, n := range framingNames {
		if string(b) == n {
			*f = FramingMode(i)
			return nil
		}
	}
	return fmt.Errorf("%q: want none or ndjson", b)
}

// framer returns the Capabilities.Framing of the mode, nil for none.
func (f FramingMode) framer() func() Framer {
	if f != FramingNDJSON {
		return nil
	}
	return func() Framer { return &ndjsonFramer{} }
}

// ndjsonFramer splits text messages at '\n'. A WebSocket message is always
// whole, so a record never spans two: nothing is kept between messages.
// Blank records (a trailing '\n', an empty line) are separators, not
// messages; a message holding no record at all (empty, blanks only) and
// every binary message pass on as they are, so nothing is lost.
type ndjsonFramer struct {
	out [][]byte
}

func (f *ndjsonFramer) Split(op ws.OpCode, data []byte) ([][]byte, error) {
	f.out = f.out[:0]
	if op == ws.OpText {
		for rest := data; len(rest) > 0; {
			var rec []byte
			rec, rest, _ = bytes.Cut(rest, []byte{'\n'})
			rec = bytes.TrimSuffix(rec, []byte{'\r'})
			if len(bytes.TrimSpace(rec)) > 0 {
				f.out = append(f.out, rec)
			}
		}
	}
	if len(f.out) == 0 {
		f.out = append(f.out, data)
	}
	return f.out, nil
}
