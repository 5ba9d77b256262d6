package upstream

import "strconv"

// State is where an upstream connection stands in its lifecycle:
//
//	connecting → open → confirmed → lost → waiting → connecting
//
// and any state → closed. The split between open and confirmed exists because
// a socket that opens and is immediately dropped (a server crash-looping, a
// load balancer accepting then resetting) must not reset the backoff attempt
// counter; only confirmation does (see docs/design.md "Reset rule").
type State int

const (
	// StateConnecting: a dial (TCP, TLS, HTTP upgrade) is in progress.
	StateConnecting State = iota
	// StateOpen: the handshake succeeded, the connection is not yet trusted.
	StateOpen
	// StateConfirmed: a confirming message arrived or the connection stayed
	// open long enough; the attempt counter has been reset.
	StateConfirmed
	// StateLost: the connection ended or a dial failed; the policy decides next.
	StateLost
	// StateWaiting: sleeping out the backoff delay before the next dial.
	StateWaiting
	// StateClosed: terminal; the owner closed the client or the failure was
	// permanent.
	StateClosed
)

var stateNames = [...]string{
	StateConnecting: "connecting",
	StateOpen:       "open",
	StateConfirmed:  "confirmed",
	StateLost:       "lost",
	StateWaiting:    "waiting",
	StateClosed:     "closed",
}

// String returns the lowercase name used in logs and metrics labels. Values
// outside the enum print as State(N) so a corrupted state is visible in logs
// rather than masquerading as a real one.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}
