//go:build !unix

package wsconn

import "net"

// rawWriter is the inline writer of rawwrite_unix.go. Elsewhere there is
// no portable write that never waits, so every write is the writer
// goroutine's.
type rawWriter struct{}

func newRawWriter(net.Conn) *rawWriter { return nil }

func (*rawWriter) tryWrite([]byte) (int, bool, error) { return 0, false, nil }
