package sequence

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults for the zero values of Config (TETHER_GAP_TIMEOUT,
// TETHER_HOLD_MAX_BYTES).
const (
	DefaultGapTimeout   = 5 * time.Second
	DefaultHoldMaxBytes = 8 << 20
)

// Policy is what a Sequencer does with a gap not filled within the gap
// timeout, or one the hold buffer has no room to wait for
// (TETHER_GAP_POLICY).
type Policy int

const (
	// PolicyClose closes the app with 1011 and the reason "unrecoverable
	// gap in stream S: missing F-T". The default: an app that cannot see a
	// loss should not go on as if nothing happened.
	PolicyClose Policy = iota
	// PolicySkip gives the numbers up and delivers on; the loss is logged
	// and counted.
	PolicySkip
	// PolicyNotify injects TETHER_GAP_NOTICE, rendered for the gap, then
	// delivers on.
	PolicyNotify
)

var policyNames = [...]string{PolicyClose: "close", PolicySkip: "skip", PolicyNotify: "notify"}

// String returns close, skip or notify.
func (p Policy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return "GapPolicy(" + strconv.Itoa(int(p)) + ")"
	}
	return policyNames[p]
}

// UnmarshalText parses close, skip or notify.
func (p *Policy) UnmarshalText(text []byte) error {
	for i, name := range policyNames {
		if string(text) == name {
			*p = Policy(i)
			return nil
		}
	}
	return fmt.Errorf("unknown gap policy %q: want close, skip or notify", text)
}

// CloseUnrecoverable is the close code the close policy gives the app: 1011,
// an unexpected condition that prevented the server from fulfilling the
// request (RFC 6455 section 7.4.1).
const CloseUnrecoverable = 1011

// Scope is where a feed's numbers count (TETHER_SEQ_SCOPE).
type Scope int

const (
	// ScopeStream: per stream, across upstream connections (the default).
	ScopeStream Scope = iota
	// ScopeConnection: per stream within one upstream connection; each
	// new connection starts the streams over (Coinbase Advanced Trade's
	// sequence_num). Duplicates are dropped within a connection;
	// continuity across connections is not claimed.
	ScopeConnection
)

var scopeNames = [...]string{ScopeStream: "stream", ScopeConnection: "connection"}

// String returns stream or connection.
func (s Scope) String() string {
	if s < 0 || int(s) >= len(scopeNames) {
		return "Scope(" + strconv.Itoa(int(s)) + ")"
	}
	return scopeNames[s]
}

// UnmarshalText parses stream or connection.
func (s *Scope) UnmarshalText(text []byte) error {
	for i, name := range scopeNames {
		if string(text) == name {
			*s = Scope(i)
			return nil
		}
	}
	return fmt.Errorf("unknown sequence scope %q: want stream or connection", text)
}
