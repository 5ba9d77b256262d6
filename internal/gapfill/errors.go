package gapfill

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrEmptyToken is returned when the token file holds only whitespace.
var ErrEmptyToken = errors.New("token file is empty")

// errAttemptTimeout marks an attempt that ran out of Options.Timeout while
// the caller's context was still live: transient.
var errAttemptTimeout = errors.New("gapfill: attempt timed out")

// StatusError is an answer with a status outside 2xx.
type StatusError struct {
	Status     int
	RetryAfter time.Duration // from Retry-After; 0 when absent or unparsable
	// Proxy is set when the HTTP proxy gave the answer: to the CONNECT of
	// an https:// URL, or a 407.
	Proxy bool
}

func (e *StatusError) Error() string {
	who := "HTTP"
	if e.Proxy {
		who = "proxy answered HTTP"
	}
	msg := fmt.Sprintf("gapfill: %s %d %s", who, e.Status, http.StatusText(e.Status))
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// TooLargeError is an answer whose body exceeds Options.MaxBytes.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("gapfill: answer exceeds the limit of %d bytes", e.Limit)
}

// ParseError is an answer that is not a JSON array of messages or NDJSON.
// Exactly one of Element and Line is set, 1-based: the array element or
// the line at fault. Offset is the byte offset in the body where the
// problem was found.
//
// Document is set instead for an answer that should have been one JSON
// value (FetchDocument): Offset is then where the problem was found.
type ParseError struct {
	Element  int
	Line     int
	Document bool
	Offset   int64
	Err      error
}

func (e *ParseError) Error() string {
	if e.Document {
		return fmt.Sprintf("gapfill: JSON document (byte %d): %v", e.Offset, e.Err)
	}
	if e.Line > 0 {
		return fmt.Sprintf("gapfill: NDJSON line %d (byte %d): %v", e.Line, e.Offset, e.Err)
	}
	if e.Element > 0 {
		return fmt.Sprintf("gapfill: JSON array element %d (byte %d): %v", e.Element, e.Offset, e.Err)
	}
	return fmt.Sprintf("gapfill: JSON array (byte %d): %v", e.Offset, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// badURLError is a URL http.NewRequest refuses; retrying cannot help.
type badURLError struct{ err error }

func (e *badURLError) Error() string { return "gapfill: bad URL: " + e.err.Error() }
func (e *badURLError) Unwrap() error { return e.err }
