//go:build !unix

package wsconn

import "net"

// newSockReader is the pooled-buffer reader of reader_unix.go. Elsewhere there
// is no portable way to wait for data without a buffer, so it returns nil and
// the connection reads through a waitReader.
func newSockReader(*Conn, net.Conn, []byte) reader { return nil }
