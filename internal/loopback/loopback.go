// Package loopback gives tests both ends of a real TCP connection on
// 127.0.0.1, for the packages that test a socket owner without a server
// around it (internal/sendq, internal/transport). It is imported by tests
// only, never by the tether binary.
//
// Concurrency: Pair waits for its own accepting goroutine before it
// returns.
package loopback

import (
	"net"
	"testing"
)

// Pair returns both ends of a loopback TCP connection: the accepted one
// (tether's side) and the dialled one (the app's). The dialled end is
// closed when the test ends; the accepted one is the caller's to close.
func Pair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close() })
	return server, client
}
