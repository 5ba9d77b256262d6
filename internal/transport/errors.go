package transport

import (
	"errors"
	"fmt"

	"github.com/gobwas/ws"
)

// ErrLineClosed is returned by a LineConn's Send and SendBatch once the tcp://
// app is closing.
var ErrLineClosed = errors.New("tcp app connection closed")

// LineError is a rule of tcp:// the app broke; the app is being closed.
// Code and Reason are what a WebSocket app would have got in its close
// frame, Drop the tether_app_dropped_total reason of the line refused.
type LineError struct {
	Code   ws.StatusCode
	Reason string
	Drop   string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("tcp app broke the line rules (%d): %s", e.Code, e.Reason)
}

// PartialLineError is an app that disconnected after Bytes bytes that no
// newline ended; they were not sent upstream.
type PartialLineError struct{ Bytes int }

func (e *PartialLineError) Error() string {
	return fmt.Sprintf("connection ended inside a line: %d bytes without a newline not sent", e.Bytes)
}

// Why an sse:// app's side ended: returned by SSEApp.ReadMessage, and by
// SSEApp.Stream for the request it served.
var (
	// ErrSSEClosed: tether closed the session (Close, Abort); also what
	// Send returns once it is closing.
	ErrSSEClosed = errors.New("tether closed the sse app's session")
	// ErrSSEAppGone: the app's request ended, and the session does not
	// linger (SSEOptions.Linger 0).
	ErrSSEAppGone = errors.New("sse app disconnected")
	// ErrSSELingerExpired: the app did not come back within
	// SSEOptions.Linger.
	ErrSSELingerExpired = errors.New("sse app did not reconnect within TETHER_SSE_LINGER")
	// ErrSSEReplaced: the request was superseded by the app's newer one,
	// which carries on.
	ErrSSEReplaced = errors.New("sse app reconnected on another request")
)
