package sse

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Encoder writes an event stream for EventSource clients. Each call makes
// exactly one Write, so a caller that flushes after each call (an
// http.Flusher) sends every event whole. An Encoder does not flush.
//
// It tracks the last event ID string the client holds, so an "id" line is
// written only when that must change. The first event or id block always
// carries one: what the client's buffer holds at the start of a stream
// depends on the client (the standard starts it empty, browsers carry the
// previous connection's value), and writing it removes the doubt.
type Encoder struct {
	w      io.Writer
	buf    []byte
	lastID string
	known  bool // lastID is what the client holds
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w}
}

// Event writes ev: an "id" line if the client's last event ID string must
// change to ev.ID, an "event" line unless the type is the default, one
// "data" line per line of ev.Data (at least one, so empty data still
// dispatches) and the blank line that dispatches it. A type or ID that
// cannot be written (ErrLineBreak, ErrNULInID) writes nothing.
func (e *Encoder) Event(ev Event) error {
	withID := !e.known || ev.ID != e.lastID
	b, err := AppendEvent(e.buf[:0], ev, withID)
	if err != nil {
		return err
	}
	if err := e.write(b); err != nil {
		return err
	}
	e.lastID, e.known = ev.ID, true
	return nil
}

// ID changes the client's last event ID string without dispatching an
// event, with an id-only block ("id: …" and a blank line). It writes
// nothing when the client already holds id.
func (e *Encoder) ID(id string) error {
	if e.known && id == e.lastID {
		return nil
	}
	if err := checkID(id); err != nil {
		return err
	}
	b := appendField(e.buf[:0], "id", id)
	if err := e.write(append(b, '\n')); err != nil {
		return err
	}
	e.lastID, e.known = id, true
	return nil
}

// Comment writes text as comment lines, one per line of text. Clients
// ignore comments; servers send them to keep idle connections (and the
// proxies on their way) alive. An empty text writes a bare ":".
func (e *Encoder) Comment(text string) error {
	return e.write(AppendComment(e.buf[:0], text))
}

// Retry asks the client to wait d before reconnecting, in whole
// milliseconds (a fraction of a millisecond is dropped).
func (e *Encoder) Retry(d time.Duration) error {
	b, err := AppendRetry(e.buf[:0], d)
	if err != nil {
		return err
	}
	return e.write(b)
}

func (e *Encoder) write(b []byte) error {
	e.buf = b[:0] // keep the grown buffer for the next call
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("sse: write stream: %w", err)
	}
	return nil
}

// AppendEvent appends the encoding of ev to dst, with an "id" line when
// withID is true (a bare "id:" when ev.ID is empty, which resets the
// client's last event ID string). See Encoder.Event.
func AppendEvent(dst []byte, ev Event, withID bool) ([]byte, error) {
	if strings.ContainsAny(ev.Type, "\r\n") {
		return dst, fmt.Errorf("sse: event type %q: %w", ev.Type, ErrLineBreak)
	}
	if withID {
		if err := checkID(ev.ID); err != nil {
			return dst, err
		}
		dst = appendField(dst, "id", ev.ID)
	}
	if ev.Type != "" && ev.Type != DefaultType {
		dst = appendField(dst, "event", ev.Type)
	}
	dst = appendLines(dst, "data", ev.Data)
	return append(dst, '\n'), nil
}

// AppendComment appends text as comment lines to dst, one per line of
// text (split at CRLF, LF or CR).
func AppendComment(dst []byte, text string) []byte {
	return appendLines(dst, "", text)
}

// AppendRetry appends a "retry" line with d in whole milliseconds.
func AppendRetry(dst []byte, d time.Duration) ([]byte, error) {
	if d < 0 {
		return dst, fmt.Errorf("sse: retry %s: %w", d, ErrNegativeRetry)
	}
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, d.Milliseconds(), 10)
	return append(dst, '\n'), nil
}

func checkID(id string) error {
	if strings.ContainsAny(id, "\r\n") {
		return fmt.Errorf("sse: id %q: %w", id, ErrLineBreak)
	}
	if strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("sse: id %q: %w", id, ErrNULInID)
	}
	return nil
}

// appendLines writes one name line per line of text, split at CRLF, LF or
// CR as a parser splits them, so that no part of text can be read as a
// line of its own.
func appendLines(dst []byte, name, text string) []byte {
	for {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			return appendField(dst, name, text)
		}
		dst = appendField(dst, name, text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// appendField writes "name: value" and LF. The space after the colon is
// always written when there is a value, because a parser removes one:
// a value that itself starts with a space keeps it. An empty name writes
// a comment line.
func appendField(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':')
	if value != "" {
		dst = append(dst, ' ')
		dst = append(dst, value...)
	}
	return append(dst, '\n')
}
