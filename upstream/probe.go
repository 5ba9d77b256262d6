package upstream

import (
	"context"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
)

// Probe checks that the upstream accepts a WebSocket connection right now: it
// dials once exactly as a Client with opts would (URL, headers, the token file
// read now, TLS, DialTimeout; Protocols offered as set), then closes the
// connection with 1000 at once. It returns nil when the handshake succeeded,
// otherwise the dial's error (*StatusError for an HTTP refusal).
//
// Probe is for readiness checks; it does not retry, back off or count
// anything. Messages the upstream sends before answering the close are
// discarded. It returns within DialTimeout plus the close handshake's bound
// (wsconn.DefaultCloseWait), or sooner when ctx ends.
func Probe(ctx context.Context, opts Options) error {
	c := &Client{opts: opts, log: zap.NewNop()}
	conn, err := c.dial(ctx, 0)
	if err != nil {
		return err
	}
	conn.ws.Close(ws.StatusNormalClosure, "")
	// Read until the upstream's close answer (or until the writer gives up
	// waiting for it and closes TCP): only the reader can see that answer,
	// and it is what ends the closing handshake early.
	for {
		if _, _, err := conn.ws.ReadMessage(); err != nil {
			break
		}
	}
	<-conn.ws.Done()
	return nil
}
