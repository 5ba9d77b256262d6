//go:build !unix

package wsconn

import "net"

// sockReader is the pooled-buffer reader of reader_unix.go. Elsewhere there is
// no portable way to wait for data without a buffer, so newSockReader returns
// nil and the connection reads through a bufio.Reader of its own.
type sockReader struct{}

func newSockReader(*Conn, net.Conn, []byte) *sockReader { return nil }

func (*sockReader) Read([]byte) (int, error) { return 0, nil }

func (*sockReader) buffered() []byte { return nil }

func (*sockReader) consume(int) {}
