package proxy

import "errors"

// ErrNoAuthReply fails a restore whose re-sent login got no reply matching
// TETHER_AUTH_OK_MATCH within TETHER_DIAL_TIMEOUT: sending the subscriptions
// anyway would have them refused, so the attempt fails and the upstream
// client backs off.
var ErrNoAuthReply = errors.New("no reply matching TETHER_AUTH_OK_MATCH within TETHER_DIAL_TIMEOUT")

// errHeadersTooLarge stops reading an app's handshake request at
// maxHandshakeBytes; the app is answered 431.
var errHeadersTooLarge = errors.New("handshake request exceeds 16 KiB")

// Why an sse:// app's side ended (ReadMessage, the writer's return), for
// the logs.
var (
	errSSEClosed        = errors.New("tether closed the sse app's session")
	errSSEAppGone       = errors.New("sse app disconnected")
	errSSELingerExpired = errors.New("sse app did not reconnect within TETHER_SSE_LINGER")
	errSSEReplaced      = errors.New("sse app reconnected on another request")
)
