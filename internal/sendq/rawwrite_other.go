//go:build !unix

package sendq

import "net"

// RawWriter is the inline writer of rawwrite_unix.go. Elsewhere there is
// no portable write that never waits: NewRawWriter returns nil, and every
// write is the owner's writer goroutine's.
type RawWriter struct{}

// NewRawWriter returns nil: see RawWriter.
func NewRawWriter(net.Conn) *RawWriter { return nil }

// TryWrite writes nothing: see RawWriter.
func (*RawWriter) TryWrite([]byte) (n int, ok bool, err error) { return 0, false, nil }
