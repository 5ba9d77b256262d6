package proxy

import (
	"fmt"
	"net"

	"github.com/tetherproxy/tether/internal/labels"
)

// ListenerKind is what an app speaks on a listener (TETHER_LISTEN's scheme).
// Every kind shares the server's upstream configuration and session rules:
// replay, sequences, outbox, limits and metrics apply to all of them alike.
type ListenerKind string

// Listener kinds. They double as the listener label of tether_sessions and
// tether_messages_total (internal/labels).
const (
	// ListenerWS is WebSocket over TCP (host:port or ws://host:port), with
	// the Origin and Host checks of internal/browser.
	ListenerWS ListenerKind = labels.ListenerWS
	// ListenerUnix is WebSocket over a unix socket (unix:///path). Any Host
	// is accepted: DNS rebinding, which the Host check prevents, needs a
	// browser to reach the socket over TCP, and no browser can open a unix
	// socket. Origin is still checked: a local reverse proxy in front of
	// the socket passes a page's Origin through.
	ListenerUnix ListenerKind = labels.ListenerUnix
	// ListenerTCP is newline-delimited text over TCP (tcp://host:port): no
	// handshake, so no Origin or Host check applies (there are no HTTP
	// headers), and admission and the first dial happen on accept
	// (listener_tcp.go, transport.LineConn).
	ListenerTCP ListenerKind = labels.ListenerTCP
	// ListenerSSE is Server-Sent Events over HTTP/1.1
	// (sse://host:port/path): EventSource apps read a text/event-stream
	// that outlives upstream losses and their own reconnections, with the
	// Origin and Host checks of internal/browser (listener_sse.go,
	// ssesession.go). Such an app sends nothing.
	ListenerSSE ListenerKind = labels.ListenerSSE
)

// valid reports whether k is one of the kinds above.
func (k ListenerKind) valid() bool {
	switch k {
	case ListenerWS, ListenerUnix, ListenerTCP, ListenerSSE:
		return true
	}
	return false
}

// errUnknownKind refuses a ServeKind call with a kind tether does not know.
func errUnknownKind(k ListenerKind) error {
	return fmt.Errorf("proxy: unknown listener kind %q: want ws, unix, tcp or sse", string(k))
}

// handle serves one accepted app connection, by the kind of its listener.
// (An sse:// listener's connections are net/http's: serveSSE.)
func (s *Server) handle(nc net.Conn, kind ListenerKind) {
	if kind == ListenerTCP {
		s.handleLines(nc)
		return
	}
	s.handleWebSocket(nc, kind)
}

// remoteAddr names an app's peer address for logs. A unix socket peer is
// usually unnamed; a nil address must not reach a Stringer.
func remoteAddr(nc net.Conn) string {
	a := nc.RemoteAddr()
	if a == nil {
		return ""
	}
	return a.String()
}
