package demo

import "errors"

var (
	// ErrInvalidOptions wraps every problem Run finds in its Options.
	ErrInvalidOptions = errors.New("invalid demo options")
	// ErrClientClosed means the naive client's socket was closed by someone
	// other than the client: the one thing tether exists to prevent.
	ErrClientClosed = errors.New("the client's socket was closed (a tether bug)")
	// ErrStreamEnded means the SSE app's event stream ended without the app
	// asking: its EventSource would have had to reconnect, which tether
	// exists to spare it.
	ErrStreamEnded = errors.New("the app's event stream ended (a tether bug)")
	// ErrTetherStopped means tether returned while the demo was running.
	ErrTetherStopped = errors.New("tether stopped unexpectedly")
)
