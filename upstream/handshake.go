package upstream

import (
	"errors"
	"fmt"
	"net"

	"github.com/gobwas/ws"
)

// maxHandshakeAnswer bounds what tether reads of the upstream's answer to a
// WebSocket handshake (status line and headers, and of a refusal what is
// read for its Retry-After). gobwas reads header lines of any number and
// length, an endless one into one growing buffer: a broken or hostile
// upstream that never ends its headers would otherwise cost memory at
// network speed until TETHER_DIAL_TIMEOUT.
const maxHandshakeAnswer = 64 << 10

// errHandshakeTooLarge ends a handshake answer over maxHandshakeAnswer.
var errHandshakeTooLarge = fmt.Errorf("answer exceeds %d KiB without ending its headers", maxHandshakeAnswer>>10)

// handshakeGuard is the connection as the dialer sees it: reads stop with
// errHandshakeTooLarge past the bound. The WebSocket connection that follows
// reads the connection itself (guarded.Conn).
type handshakeGuard struct {
	net.Conn
	left int
}

func (g *handshakeGuard) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, errHandshakeTooLarge
	}
	if len(p) > g.left {
		p = p[:g.left]
	}
	n, err := g.Conn.Read(p)
	g.left -= n
	return n, err
}

// HandshakeError is an upstream answer to the WebSocket handshake that is
// not one: a 101 without a valid Sec-WebSocket-Accept (a server that is no
// WebSocket server, or a proxy in between that mangles the upgrade), bad
// Upgrade or Connection headers, extensions that were not offered, a
// malformed response, headers without end. It is transient: the dial is
// retried with backoff, as a proxy or a deployment may heal, and counted as
// the dial result "handshake".
type HandshakeError struct {
	Problem string
	err     error
}

// Error reads `upstream handshake failed: 101 without a valid
// Sec-WebSocket-Accept`.
func (e *HandshakeError) Error() string { return "upstream handshake failed: " + e.Problem }

func (e *HandshakeError) Unwrap() error { return e.err }

// handshakeProblems names gobwas' handshake errors for an operator.
var handshakeProblems = []struct {
	err     error
	problem string
}{
	{ws.ErrHandshakeBadSecAccept, "101 without a valid Sec-WebSocket-Accept"},
	{ws.ErrHandshakeBadUpgrade, `101 without "Upgrade: websocket"`},
	{ws.ErrHandshakeBadConnection, `101 without "Connection: Upgrade"`},
	{ws.ErrHandshakeBadExtensions, "101 with extensions that were not offered"},
	{ws.ErrHandshakeBadProtocol, "answer is not HTTP/1.1"},
	{ws.ErrMalformedResponse, "malformed HTTP answer"},
	{errHandshakeTooLarge, errHandshakeTooLarge.Error()},
}

// handshakeError types a dial error that is the upstream's broken answer,
// or returns nil.
func handshakeError(err error) *HandshakeError {
	for _, p := range handshakeProblems {
		if errors.Is(err, p.err) {
			return &HandshakeError{Problem: p.problem, err: err}
		}
	}
	return nil
}
