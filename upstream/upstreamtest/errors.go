package upstreamtest

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Conn methods once the connection was closed
	// locally (Close, Reset, CloseWith or Server.Close).
	ErrClosed = errors.New("upstreamtest: connection closed")
	// ErrStalled is returned by Conn writes after Stall: a stalled peer sends
	// nothing at all, not even pongs.
	ErrStalled = errors.New("upstreamtest: connection stalled")
	// ErrCloseSent is returned by writes after a close frame went out: RFC 6455
	// section 5.5.1 forbids sending data frames after a close frame.
	ErrCloseSent = errors.New("upstreamtest: close frame already sent")
	// ErrControlTooLong is returned when a ping payload or close reason would
	// exceed the 125-byte control frame limit (RFC 6455 section 5.5).
	ErrControlTooLong = errors.New("upstreamtest: control frame payload longer than 125 bytes")
)

// CloseFrame is the close frame the client sent. Conn.Read returns it (as
// *CloseFrame) once the client has closed. Code is 1005 when the frame carried
// no status code (RFC 6455 section 7.1.5).
type CloseFrame struct {
	Code   int
	Reason string
}

func (e *CloseFrame) Error() string {
	return fmt.Sprintf("upstreamtest: client sent close frame %d %q", e.Code, e.Reason)
}

// ProtocolError reports a client frame that violated RFC 6455 (unmasked
// frame, reserved bits, bad continuation, oversized message, invalid UTF-8 in
// a text message). The server answered with a close frame carrying Code and
// dropped the connection; Conn.Read returns it so tests can tell a client bug
// from a network fault.
type ProtocolError struct {
	Code int
	Err  error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("upstreamtest: client protocol violation (close %d): %v", e.Code, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }
