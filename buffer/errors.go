package buffer

import (
	"errors"
	"fmt"
)

// ErrOutboxFull is returned by [Outbox.Push] under [OverflowClose] when the
// message does not fit. Its text doubles as the WebSocket close reason the
// session sends with code 1013 (docs/design.md "Outbox and acknowledgements").
var ErrOutboxFull = errors.New("outbox full")

// ErrReplayLogFull is returned by [ReplayLog.Add] when keeping the entry
// would exceed the log's caps. Its text doubles as the close reason the
// session sends with code 1013: replaying a partial subscription set after
// the next reconnect would be a silent loss.
var ErrReplayLogFull = errors.New("replay log full")

// GapError is an unrecoverable gap in a sequenced stream: the numbers From
// to To (inclusive) were not filled within TETHER_GAP_TIMEOUT, or could not
// be waited for because the hold buffer was full. Its text doubles as the
// close reason the session sends with code 1011 under the close gap policy
// (docs/design.md "Sequences and gap filling").
type GapError struct {
	Stream   string
	From, To int64
}

// Error returns "unrecoverable gap in stream S: missing F-T", or without
// "in stream S" for the single unnamed stream (TETHER_STREAM_PATH unset),
// where an empty name would only read as a typo.
func (e *GapError) Error() string {
	if e.Stream == "" {
		return fmt.Sprintf("unrecoverable gap: missing %d-%d", e.From, e.To)
	}
	return fmt.Sprintf("unrecoverable gap in stream %s: missing %d-%d", e.Stream, e.From, e.To)
}
