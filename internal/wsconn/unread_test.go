package wsconn_test

import (
	"net"
	"runtime"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Unread counts what the peer sent and the reader has not read yet, in the
// kernel's receive queue: none before, a whole frame once it arrived, none
// once it was read. Through TLS too, where the queue holds records.
func TestUnread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Unread asks the kernel (SIOCINQ) on Linux only: elsewhere it reports 0")
	}
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[secure], func(t *testing.T) {
			var srv *wsconn.Conn
			var peer net.Conn
			if secure {
				srv, peer = tlsSide(t)
			} else {
				srv, peer = serverSide(t, wsconn.Options{})
			}
			if n := srv.Unread(); n != 0 {
				t.Fatalf("Unread() = %d before the peer sent anything", n)
			}
			frame := encode(t, clientFrame(ws.OpText, true, []byte("unread")))
			writeRawBytes(t, peer, frame)
			// Loopback hands the bytes over within the peer's write, or
			// soon after when softirqs are deferred.
			waitFor(t, "the frame waiting unread", func() bool { return srv.Unread() >= len(frame) })
			if _, p := mustRead(t, srv); string(p) != "unread" {
				t.Fatalf("read %q, want \"unread\"", p)
			}
			if n := srv.Unread(); n != 0 {
				t.Fatalf("Unread() = %d once the message was read, want 0", n)
			}
		})
	}
}

// tlsSide is a wsconn server over TLS on loopback, with the raw TLS client
// that feeds it frames.
func tlsSide(t *testing.T) (*wsconn.Conn, net.Conn) {
	t.Helper()
	p := newRawPair(t)
	server, client := tlsPair(t, p.server, p.client)
	return wrap(t, server, nil, wsconn.Options{}), client
}
