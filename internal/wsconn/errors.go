package wsconn

import (
	"errors"
	"fmt"

	"github.com/gobwas/ws"
)

// ErrClosed is returned by Send and Ping once the connection is closing or closed.
var ErrClosed = errors.New("websocket connection closed")

// CloseError is the close frame the peer sent. Code is 1005 (no status) when the
// frame carried no code.
type CloseError struct {
	Code   ws.StatusCode
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("peer closed with %d", e.Code)
	}
	return fmt.Sprintf("peer closed with %d %q", e.Code, e.Reason)
}

// ProtocolError is a violation of RFC 6455 (or of a configured limit) by the peer.
// tether sent a close frame with Code before returning it.
type ProtocolError struct {
	Code   ws.StatusCode
	Reason string
	// InClose is set when the violation was in the peer's close frame, whose
	// code, when it had one, is PeerCode: a peer closing with a frame it
	// cannot write is no peer to reconnect to blindly.
	InClose  bool
	PeerCode ws.StatusCode
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("websocket protocol error (%d): %s", e.Code, e.Reason)
}
