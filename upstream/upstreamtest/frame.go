package upstreamtest

import (
	"fmt"
	"io"

	"github.com/gobwas/ws"
)

// ReadFrame reads one raw frame from r for tests that inspect frames one by one
// (masking, fragmentation, close payloads). Unlike the deprecated ws.ReadFrame it
// refuses a declared payload longer than max before reading it. The payload is
// returned as sent: still masked when the header says so.
func ReadFrame(r io.Reader, max int64) (ws.Frame, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return ws.Frame{}, err
	}
	if h.Length > max {
		return ws.Frame{}, fmt.Errorf("upstreamtest: frame of %d bytes exceeds %d", h.Length, max)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return ws.Frame{}, err
	}
	return ws.Frame{Header: h, Payload: p}, nil
}
