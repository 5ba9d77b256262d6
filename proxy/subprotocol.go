package proxy

import (
	"sync"

	"github.com/tetherproxy/tether/upstream"
)

// appSubprotocol is the subprotocol the app was accepted with, once it is
// known: set by the goroutine that accepts the app, read by each restore.
type appSubprotocol struct {
	mu    sync.Mutex
	p     string
	known bool
}

// set records the subprotocol the app was accepted with.
func (a *appSubprotocol) set(p string) {
	a.mu.Lock()
	a.p, a.known = p, true
	a.mu.Unlock()
}

// check refuses an upstream connection that speaks another subprotocol
// than the one the app was given: the upstream client checks each dial
// against the pinned protocol, but a dial may have passed that check just
// before the app was accepted with its own first choice (pinProtocol). The
// restore fails, and the next dial offers only the app's.
func (a *appSubprotocol) check(c *upstream.Conn) error {
	a.mu.Lock()
	want, known := a.p, a.known
	a.mu.Unlock()
	if known && c.Protocol() != want {
		return &upstream.SubprotocolError{Want: want, Got: c.Protocol()}
	}
	return nil
}
