package sse

import (
	"errors"
	"fmt"
)

// ErrLineBreak is returned when an event type or an id to encode contains
// CR or LF: the receiver would cut the field there and read the rest as
// another line.
var ErrLineBreak = errors.New("sse: value contains a line break")

// ErrNULInID is returned when an id to encode contains U+0000: a receiver
// ignores such an "id" field, so the id could never reach it.
var ErrNULInID = errors.New("sse: id contains U+0000")

// ErrNegativeRetry is returned when a negative reconnection time is to be
// encoded: the "retry" field only carries ASCII digits.
var ErrNegativeRetry = errors.New("sse: negative retry")

// errNoProgress is returned when the source keeps answering Read with no
// bytes and no error, which would otherwise spin Next forever.
var errNoProgress = errors.New("sse: source returned no data and no error repeatedly")

// TooLargeError reports a stream that exceeded Options.MaxEventSize: a line
// longer than the limit, or an event whose data grew past it. The Reader
// stops there; the stream cannot be resynchronised without trusting it.
type TooLargeError struct {
	Limit int  // the MaxEventSize in force, in bytes
	Line  bool // a single line exceeded the limit (otherwise: event data)
}

func (e *TooLargeError) Error() string {
	what := "event data"
	if e.Line {
		what = "line"
	}
	return fmt.Sprintf("sse: %s exceeds the limit of %d bytes (MaxEventSize)", what, e.Limit)
}
