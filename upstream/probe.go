package upstream

import (
	"context"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
)

// Probe checks that the upstream accepts a connection right now: it dials
// once exactly as a Client with opts would (URL, headers, the token file read
// now, TLS, DialTimeout; Protocols offered as set), then closes the
// connection at once: a WebSocket with 1000, an SSE request by ending it as
// soon as the response headers show an event stream. It returns nil when
// that succeeded, otherwise the dial's error (*StatusError for an HTTP
// refusal; for SSE also a 204 or a body that is not an event stream, both
// wrapping ErrPermanent).
//
// Probe is for readiness checks; it does not retry, back off or count
// anything, and an SSE probe sends no Last-Event-ID. Messages the upstream
// sends before answering the close are discarded. It returns within
// DialTimeout plus the close handshake's bound (wsconn.DefaultCloseWait), or
// sooner when ctx ends.
func Probe(ctx context.Context, opts Options) error {
	if err := checkKind(opts); err != nil {
		return err
	}
	c := &Client{opts: &opts, sess: Session{URL: opts.URL, Protocols: opts.Protocols, Account: opts.Account}, log: zap.NewNop()}
	if opts.Kind == KindSSE {
		c.http = newHTTPClient(opts)
		defer c.closeIdle()
	}
	conn, err := c.dial(ctx, 0)
	if err != nil {
		return err
	}
	conn.ws.Close(ws.StatusNormalClosure, "")
	// Read until the upstream's close answer (or until the writer gives up
	// waiting for it and closes TCP): only the reader can see that answer,
	// and it is what ends the closing handshake early. An event stream's
	// reader stops at once.
	for {
		if _, _, err := conn.ws.ReadMessage(); err != nil {
			break
		}
	}
	<-conn.ws.Done()
	return nil
}
