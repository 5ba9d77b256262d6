package sse

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// readAll returns every Item of the stream, and the error that ended it
// (nil for io.EOF).
func readAll(r *Reader) ([]Item, error) {
	var items []Item
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items = append(items, it)
	}
}

func mustReadAll(t *testing.T, r *Reader) []Item {
	t.Helper()
	items, err := readAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return items
}

// chunkReader hands out its data in the pieces listed, then io.EOF. It
// lets a test place a Read boundary exactly (between CR and LF, inside a
// BOM or a UTF-8 sequence).
type chunkReader struct {
	chunks []string
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// randomReader hands out data in random pieces, sometimes nothing, and
// sometimes the last piece together with io.EOF: the shapes a network
// body and its io.Reader contract allow.
type randomReader struct {
	data []byte
	rnd  *rand.Rand
}

func (c *randomReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	var n int
	switch c.rnd.IntN(8) {
	case 0:
		return 0, nil
	case 1:
		n = len(c.data) // as much as fits
	default:
		n = 1 + c.rnd.IntN(12)
	}
	n = copy(p, c.data[:min(n, len(c.data))])
	c.data = c.data[n:]
	if len(c.data) == 0 && c.rnd.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func ev(typ, data, id string) Item {
	return Item{Kind: KindEvent, Event: Event{Type: typ, Data: data, ID: id}}
}

func msg(data, id string) Item { return ev(DefaultType, data, id) }

func comment(text string) Item { return Item{Kind: KindComment, Comment: text} }

func idItem(id string) Item { return Item{Kind: KindID, LastEventID: id} }

// short formats v for a failure message, cut so that a case with a long
// line does not bury the failure.
func short(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
