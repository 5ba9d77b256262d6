package proxy

import "errors"

// ErrNoAuthReply fails a restore whose re-sent login got no reply matching
// TETHER_AUTH_OK_MATCH within TETHER_DIAL_TIMEOUT: sending the subscriptions
// anyway would have them refused, so the attempt fails and the upstream
// client backs off.
var ErrNoAuthReply = errors.New("no reply matching TETHER_AUTH_OK_MATCH within TETHER_DIAL_TIMEOUT")

// ErrNoReplayReply fails a restore whose replayed subscriptions did not all
// get their reply within TETHER_DIAL_TIMEOUT, when the protocol awaits them
// (protocol.Capabilities.AwaitReplies).
var ErrNoReplayReply = errors.New("no reply to every replayed subscription within TETHER_DIAL_TIMEOUT")
